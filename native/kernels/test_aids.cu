// Test and example aids, never in the product shim: compiled into the
// test-aid build (native/testaid.c) only.

#include <stdint.h>

// Keeps a stream busy for a given time (read from the GPU's global timer),
// so that work queued after it is certainly in flight while a test
// inspects it. One thread.
extern "C" __global__ void mtc_delay_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

// Adds the `count` floats at `src` into `*dst`: the device-side consumer of
// examples/training_loop.ts. One block of 256 threads.
extern "C" __global__ void mtc_sum_f32_kernel(const float *src, uint64_t count, float *dst) {
  __shared__ float partial[256];
  float sum = 0.0f;
  for (uint64_t i = threadIdx.x; i < count; i += blockDim.x) sum += src[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(dst, partial[0]);
}

// Writes through an address no allocation covers: the device faults with
// CUDA_ERROR_ILLEGAL_ADDRESS, an error that sticks to the context, so that
// a test can check that every later copy to that device fails cleanly. One
// thread; run it only in a process of its own.
extern "C" __global__ void mtc_illegal_address_kernel(uint64_t address) {
  *reinterpret_cast<volatile uint32_t *>(address) = 0xdeadbeefu;
}
