// Device code of examples/training_loop.ts, tests and benchmarks, shipped as
// PTX text (examples/step_kernels.ptx, built by native/build_example_ptx.sh)
// that the driver JIT-compiles: running it needs a driver and nothing else.
// Every kernel is extern "C", so that its name in the PTX is the plain name.

#include <stdint.h>

// Adds the `count` floats at `src` into dst[index]. Blocks of 256 threads,
// as many as fit the data (each adds its part with one atomic).
extern "C" __global__ void sum_f32(const float *src, uint32_t count, float *dst, uint32_t index) {
  __shared__ float partial[256];
  float sum = 0.0f;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    sum += src[i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(dst + index, partial[0]);
}

// x[i] = x[i] * a + b for i < n (grid-stride).
extern "C" __global__ void scale_f32(float *x, float a, float b, uint32_t n) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = x[i] * a + b;
  }
}

// Copies `n` bytes from `src` to `dst` (grid-stride): a consumer that reads
// a copied tensor and leaves what it read where the CPU can check it.
extern "C" __global__ void copy_u8(const uint8_t *src, uint8_t *dst, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x) {
    dst[i] = src[i];
  }
}

// Keeps its stream busy for `nanoseconds` (the GPU's global timer): one
// thread. Tests use it to hold work back on the GPU.
extern "C" __global__ void spin_ns(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

// Writes `value` to *dst: with an address no allocation covers, a fault
// (CUDA_ERROR_ILLEGAL_ADDRESS) that breaks the device's context for good.
extern "C" __global__ void write_u32(uint32_t *dst, uint32_t value) { *dst = value; }

// Does nothing: what a launch costs, measured.
extern "C" __global__ void noop() {}
