// The gather kernel: packs many small device tensors into one buffer, so
// that they leave the device with one DMA. One block per table entry; the
// table is read straight from mapped pinned memory, so it needs no copy of
// its own. Compiled ahead of time into native/generated/gather_fatbin.h by
// native/build_kernels.sh, and loaded with cuModuleLoadData.

#include <stdint.h>

#include "../gather_entry.h"

extern "C" __global__ void mtc_gather_kernel(const mtc_gather_entry *table, uint8_t *dst) {
  mtc_gather_entry e = table[blockIdx.x];
  const uint8_t *src = (const uint8_t *)(uintptr_t)(uint64_t)e.src;
  uint8_t *out = dst + (uint64_t)e.dst_offset;
  uint64_t n = (uint64_t)e.bytes;
  if ((((uintptr_t)src | (uintptr_t)out | n) & 15) == 0) {
    const uint4 *s4 = (const uint4 *)src;
    uint4 *d4 = (uint4 *)out;
    for (uint64_t i = threadIdx.x; i < n / 16; i += blockDim.x) d4[i] = s4[i];
  } else if ((((uintptr_t)src | (uintptr_t)out | n) & 3) == 0) {
    const uint32_t *s = (const uint32_t *)src;
    uint32_t *d = (uint32_t *)out;
    for (uint64_t i = threadIdx.x; i < n / 4; i += blockDim.x) d[i] = s[i];
  } else {
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = src[i];
  }
}
