// @mtc/core native shim: a small, boring C ABI over the CUDA runtime.
//
// Every export is `mtc_*`, returns an int32 status (0 = OK, otherwise a
// cudaError_t or an MTC_E_* code) and writes results through out-pointers.
// Sizes, addresses and handles cross the boundary as doubles (`addr_t`):
// user-space and device addresses are below 2^48, so a double holds them
// exactly, and Deno's FFI passes doubles on its fast path with no BigInt or
// PointerObject allocation. JS can then do address arithmetic (chunk base +
// offset) for free. The CUDA runtime is linked
// statically: the only run-time dependency is the driver's libcuda.so.1,
// which cudart loads lazily, so this library loads on machines with no driver
// and reports zero devices there.

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MTC_ABI_VERSION 5
#define MTC_MAX_DEVICES 64

// Our own status codes, above every cudaError_t value.
#define MTC_E_BAD_DEVICE 100001
#define MTC_E_BAD_ARGUMENT 100002

#define EXPORT extern "C" __attribute__((visibility("default")))

typedef double addr_t;
#define PTR(a) ((void *)(uintptr_t)(uint64_t)(a))
#define ADDR(p) ((double)(uintptr_t)(p))

static cudaStream_t g_streams[MTC_MAX_DEVICES];
static int g_pool_configured[MTC_MAX_DEVICES];
// Counters that tests and benchmarks read to prove steady state allocates
// nothing. Updated only by the JS main thread or a staging worker; they are
// statistics, so relaxed atomics are enough.
static volatile int64_t g_host_allocs, g_device_allocs, g_copies, g_kernels;

static int clear_error(cudaError_t err) {
  // Non-sticky errors stay queued in the runtime; read it so the next call
  // does not report a stale failure.
  if (err != cudaSuccess) cudaGetLastError();
  return (int)err;
}

static int stream_for(int device, cudaStream_t *out) {
  if (device < 0 || device >= MTC_MAX_DEVICES) return MTC_E_BAD_DEVICE;
  // CUDA's current device is per thread: every entry point sets it.
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) return clear_error(err);
  if (g_streams[device] == NULL) {
    cudaStream_t s;
    err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err != cudaSuccess) return clear_error(err);
    // Another thread may have raced us; keep the first stream.
    if (!__sync_bool_compare_and_swap(&g_streams[device], NULL, s)) {
      cudaStreamDestroy(s);
    }
  }
  if (!g_pool_configured[device]) {
    // Keep freed device memory cached in the stream-ordered pool instead of
    // returning it to the OS at every synchronisation point.
    cudaMemPool_t pool;
    err = cudaDeviceGetDefaultMemPool(&pool, device);
    if (err != cudaSuccess) return clear_error(err);
    uint64_t threshold = UINT64_MAX;
    err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (err != cudaSuccess) return clear_error(err);
    g_pool_configured[device] = 1;
  }
  *out = g_streams[device];
  return 0;
}

EXPORT int32_t mtc_abi_version(void) { return MTC_ABI_VERSION; }

EXPORT const char *mtc_error_name(int32_t code) {
  if (code == MTC_E_BAD_DEVICE) return "mtcErrorBadDevice";
  if (code == MTC_E_BAD_ARGUMENT) return "mtcErrorBadArgument";
  return cudaGetErrorName((cudaError_t)code);
}

EXPORT const char *mtc_error_string(int32_t code) {
  if (code == MTC_E_BAD_DEVICE) return "device index out of range";
  if (code == MTC_E_BAD_ARGUMENT) return "invalid argument";
  return cudaGetErrorString((cudaError_t)code);
}

// Writes the number of usable devices; 0 (with status 0) where there is no
// driver or no GPU, because "no GPU here" is an answer, not a failure.
EXPORT int32_t mtc_device_count(int32_t *out) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
      err == cudaErrorInitializationError || err == cudaErrorNotSupported ||
      err == cudaErrorSystemDriverMismatch || err == cudaErrorCompatNotSupportedOnDevice) {
    cudaGetLastError();
    *out = 0;
    return 0;
  }
  if (err != cudaSuccess) return clear_error(err);
  *out = n > MTC_MAX_DEVICES ? MTC_MAX_DEVICES : n;
  return 0;
}

// Counters: [host allocations, device allocations, copies, kernel launches].
EXPORT void mtc_counters(double *out) {
  out[0] = (double)g_host_allocs;
  out[1] = (double)g_device_allocs;
  out[2] = (double)g_copies;
  out[3] = (double)g_kernels;
}

// Page-locked, portable and mapped host memory: any device may DMA from it
// and kernels may read it through its (UVA-identical) address.
EXPORT int32_t mtc_host_alloc(double bytes, double *out) {
  void *p = NULL;
  cudaError_t err = cudaHostAlloc(&p, (size_t)bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (err != cudaSuccess) return clear_error(err);
  __sync_fetch_and_add(&g_host_allocs, 1);
  *out = ADDR(p);
  return 0;
}

EXPORT int32_t mtc_host_free(addr_t p) { return clear_error(cudaFreeHost(PTR(p))); }

// Stream-ordered device allocation on the library's stream for `device`.
EXPORT int32_t mtc_device_alloc(int32_t device, double bytes, double *out) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  void *p = NULL;
  cudaError_t err = cudaMallocAsync(&p, (size_t)bytes, s);
  if (err != cudaSuccess) return clear_error(err);
  __sync_fetch_and_add(&g_device_allocs, 1);
  *out = ADDR(p);
  return 0;
}

EXPORT int32_t mtc_device_free(int32_t device, addr_t p) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  return clear_error(cudaFreeAsync(PTR(p), s));
}

// Events belong to a device: one recorded on another device's stream fails
// with cudaErrorInvalidResourceHandle, so the device is explicit.
EXPORT int32_t mtc_event_create(int32_t device, double *out) {
  if (device < 0 || device >= MTC_MAX_DEVICES) return MTC_E_BAD_DEVICE;
  cudaError_t set = cudaSetDevice(device);
  if (set != cudaSuccess) return clear_error(set);
  cudaEvent_t e;
  cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (err != cudaSuccess) return clear_error(err);
  *out = ADDR(e);
  return 0;
}

EXPORT int32_t mtc_event_destroy(addr_t e) { return clear_error(cudaEventDestroy((cudaEvent_t)PTR(e))); }

EXPORT int32_t mtc_event_record(int32_t device, addr_t e) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  return clear_error(cudaEventRecord((cudaEvent_t)PTR(e), s));
}

// 0 when complete, cudaErrorNotReady (600) while pending, else the failure.
EXPORT int32_t mtc_event_query(addr_t e) {
  cudaError_t err = cudaEventQuery((cudaEvent_t)PTR(e));
  if (err == cudaErrorNotReady) return (int)err;
  return clear_error(err);
}

EXPORT int32_t mtc_event_synchronize(addr_t e) {
  return clear_error(cudaEventSynchronize((cudaEvent_t)PTR(e)));
}

// Makes the library stream of `device` wait for `e` (recorded anywhere).
EXPORT int32_t mtc_stream_wait_event(int32_t device, addr_t e) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  return clear_error(cudaStreamWaitEvent(s, (cudaEvent_t)PTR(e), 0));
}

// One async copy on the stream of `device`, then (if `event` is not NULL) an
// event record after it: the whole submission of a packed chunk in one call.
// With UVA, cudaMemcpyDefault infers the direction from the addresses.
EXPORT int32_t mtc_copy_async(int32_t device, addr_t dst, addr_t src, double bytes, addr_t event) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  if (bytes > 0) {
    cudaError_t err = cudaMemcpyAsync(PTR(dst), PTR(src), (size_t)bytes, cudaMemcpyDefault, s);
    if (err != cudaSuccess) return clear_error(err);
    __sync_fetch_and_add(&g_copies, 1);
  }
  if (event) return clear_error(cudaEventRecord((cudaEvent_t)PTR(event), s));
  return 0;
}

// Host-to-device copy straight from a JS buffer (pageable memory). For
// pageable sources the runtime snapshots the bytes before returning, so the
// JS buffer may be reused as soon as this call returns.
EXPORT int32_t mtc_copy_from_buffer(int32_t device, addr_t dst, const uint8_t *src, double offset,
                                    double bytes) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  if (bytes <= 0) return 0;
  if (src == NULL) return MTC_E_BAD_ARGUMENT;
  cudaError_t err = cudaMemcpyAsync(PTR(dst), src + (size_t)offset, (size_t)bytes, cudaMemcpyHostToDevice, s);
  if (err != cudaSuccess) return clear_error(err);
  __sync_fetch_and_add(&g_copies, 1);
  return 0;
}

// Synchronous device-to-host copy into a JS buffer, ordered after everything
// queued on the library stream. Used by the unpinned GPU->CPU path and tests.
EXPORT int32_t mtc_copy_to_buffer(int32_t device, uint8_t *dst, double offset, addr_t src,
                                  double bytes) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  if (bytes <= 0) return 0;
  if (dst == NULL) return MTC_E_BAD_ARGUMENT;
  cudaError_t err = cudaMemcpyAsync(dst + (size_t)offset, PTR(src), (size_t)bytes, cudaMemcpyDeviceToHost, s);
  if (err != cudaSuccess) return clear_error(err);
  __sync_fetch_and_add(&g_copies, 1);
  return clear_error(cudaStreamSynchronize(s));
}

// Stages `bytes` from pageable host memory into pinned memory (plain memcpy
// on the calling thread), then queues the pinned->device copy on the stream.
// Staging workers call this per piece, so staging and DMA overlap.
EXPORT int32_t mtc_stage_and_copy(int32_t device, addr_t dst, addr_t pinned, addr_t src, double bytes) {
  if (bytes <= 0) return 0;
  memcpy(PTR(pinned), PTR(src), (size_t)bytes);
  return mtc_copy_async(device, dst, pinned, bytes, 0);
}

// Plain host memcpy, for staging into pinned memory off the main thread.
EXPORT void mtc_memcpy(addr_t dst, addr_t src, double bytes) {
  if (bytes > 0) memcpy(PTR(dst), PTR(src), (size_t)bytes);
}

// Peer copy from `src` on `src_device` to `dst` on `dst_device`, ordered
// after all work already queued on both library streams, and later work on
// both streams ordered after it. `fence_a`/`fence_b` are scratch events.
EXPORT int32_t mtc_copy_peer(int32_t dst_device, addr_t dst, int32_t src_device, addr_t src, double bytes,
                             addr_t fence_a, addr_t fence_b) {
  cudaStream_t sd, ss;
  int st = stream_for(dst_device, &sd);
  if (st) return st;
  st = stream_for(src_device, &ss);
  if (st) return st;
  cudaError_t err = cudaEventRecord((cudaEvent_t)PTR(fence_a), sd);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(ss, (cudaEvent_t)PTR(fence_a), 0);
  if (err == cudaSuccess && bytes > 0) {
    err = cudaMemcpyPeerAsync(PTR(dst), dst_device, PTR(src), src_device, (size_t)bytes, ss);
    if (err == cudaSuccess) __sync_fetch_and_add(&g_copies, 1);
  }
  if (err == cudaSuccess) err = cudaEventRecord((cudaEvent_t)PTR(fence_b), ss);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(sd, (cudaEvent_t)PTR(fence_b), 0);
  if (err == cudaSuccess) err = cudaSetDevice(dst_device);
  return clear_error(err);
}

// One gather entry: where a tensor lives and where it goes in the packed
// buffer. Doubles, because JS writes them into a Float64Array for free.
struct GatherEntry {
  double src;
  double dst_offset;
  double bytes;
};

// One block per entry. Entries are read straight from mapped pinned memory,
// so the table needs no copy of its own.
__global__ void gather_kernel(const GatherEntry *table, uint8_t *dst) {
  GatherEntry e = table[blockIdx.x];
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

// The end of a gather: the optional copy of the packed buffer to the host,
// then the optional event record.
static int finish_gather(cudaStream_t s, addr_t dst, addr_t host_dst, double bytes, addr_t event) {
  if (host_dst && bytes > 0) {
    cudaError_t err = cudaMemcpyAsync(PTR(host_dst), PTR(dst), (size_t)bytes, cudaMemcpyDefault, s);
    if (err != cudaSuccess) return clear_error(err);
    __sync_fetch_and_add(&g_copies, 1);
  }
  if (event) return clear_error(cudaEventRecord((cudaEvent_t)PTR(event), s));
  return 0;
}

// Gathers `count` device tensors of `device` into the packed device buffer
// `dst` (one kernel), then optionally copies `bytes` of it to `host_dst`
// (one transfer) and records `event`. This is how many small GPU tensors
// leave the device with one DMA.
EXPORT int32_t mtc_gather(int32_t device, addr_t table, int32_t count, addr_t dst, addr_t host_dst,
                          double bytes, addr_t event) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  if (count > 0) {
    gather_kernel<<<count, 256, 0, s>>>((const GatherEntry *)PTR(table), (uint8_t *)PTR(dst));
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
    __sync_fetch_and_add(&g_kernels, 1);
  }
  return finish_gather(s, dst, host_dst, bytes, event);
}

// Waits until everything queued on the library stream of `device` is done.
EXPORT int32_t mtc_stream_synchronize(int32_t device) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  return clear_error(cudaStreamSynchronize(s));
}

// Bytes of free and total device memory, for leak checks in tests.
EXPORT int32_t mtc_mem_info(int32_t device, double *out) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  size_t free_b = 0, total_b = 0;
  cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
  if (err != cudaSuccess) return clear_error(err);
  out[0] = (double)free_b;
  out[1] = (double)total_b;
  return 0;
}

// Copies `bytes` from a JS buffer (at `offset`) to a host address, e.g. into
// pinned memory from a staging worker that only knows the address.
EXPORT int32_t mtc_host_write(addr_t dst, const uint8_t *src, double offset, double bytes) {
  if (bytes <= 0) return 0;
  if (src == NULL) return MTC_E_BAD_ARGUMENT;
  memcpy(PTR(dst), src + (size_t)offset, (size_t)bytes);
  return 0;
}

// The same gather as mtc_gather, done by the copy engines instead of a
// kernel: one cudaMemcpyBatchAsync of `count` device-to-device copies into
// `dst`, then the optional device-to-host copy and event. Kept so that the
// benchmark can compare both on the same data (the library uses the kernel).
EXPORT int32_t mtc_gather_batch(int32_t device, addr_t table, int32_t count, addr_t dst,
                                addr_t host_dst, double bytes, addr_t event) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  if (count > 0) {
    const GatherEntry *entries = (const GatherEntry *)PTR(table);
    void **dsts = (void **)malloc(sizeof(void *) * (size_t)count);
    const void **srcs = (const void **)malloc(sizeof(void *) * (size_t)count);
    size_t *sizes = (size_t *)malloc(sizeof(size_t) * (size_t)count);
    if (!dsts || !srcs || !sizes) {
      free(dsts);
      free(srcs);
      free(sizes);
      return (int)cudaErrorMemoryAllocation;
    }
    size_t n = 0;
    for (int32_t i = 0; i < count; i++) {
      if (entries[i].bytes <= 0) continue;  // zero-size copies are invalid in a batch
      dsts[n] = (uint8_t *)PTR(dst) + (uint64_t)entries[i].dst_offset;
      srcs[n] = PTR(entries[i].src);
      sizes[n] = (size_t)entries[i].bytes;
      n++;
    }
    struct cudaMemcpyAttributes attrs;
    memset(&attrs, 0, sizeof(attrs));
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t attrs_index = 0;
    cudaError_t err = n > 0 ? cudaMemcpyBatchAsync(dsts, srcs, sizes, n, &attrs, &attrs_index, 1, s)
                            : cudaSuccess;
    free(dsts);
    free(srcs);
    free(sizes);
    if (err != cudaSuccess) return clear_error(err);
    __sync_fetch_and_add(&g_copies, 1);
  }
  return finish_gather(s, dst, host_dst, bytes, event);
}

__global__ void delay_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

// Queues a one-thread kernel that keeps the library stream of `device` busy
// for `microseconds`. A test aid: it holds copies "in flight" for certain, so
// tests can check that nothing is reused or freed before its copy is done.
EXPORT int32_t mtc_delay_stream(int32_t device, double microseconds) {
  cudaStream_t s;
  int st = stream_for(device, &s);
  if (st) return st;
  delay_kernel<<<1, 1, 0, s>>>((uint64_t)(microseconds * 1000.0));
  return clear_error(cudaGetLastError());
}
