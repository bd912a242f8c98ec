// A test aid, never in the product shim: a one-thread kernel that keeps a
// stream busy for a given time (read from the GPU's global timer), so that
// work queued after it is certainly in flight while a test inspects it.

#include <stdint.h>

extern "C" __global__ void mtc_delay_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
