// @mtc/core native shim: a small, boring C ABI over the CUDA driver API.
//
// Every export is `mtc_*`, returns an int32 status (0 = OK, otherwise a
// CUresult or an MTC_E_* code) and writes results through out-pointers.
// The driver (libcuda.so.1) is opened with dlopen on first use (driver.c),
// so this library loads on any Linux machine and says why CUDA cannot be
// used where it cannot. Device code is compiled ahead of time into a fat
// binary embedded below and loaded with cuModuleLoadData. The exports are
// exactly the symbols of ffi/symbols.ts; test aids live in testaid.c, the
// background stagers in stager.c.

#include <string.h>

#include "gather_entry.h"
#include "generated/gather_fatbin.h"
#include "shim.h"

// Bumped whenever an export changes; the loader refuses any other version.
// (The test build overrides it to check that refusal.)
#ifndef MTC_ABI_VERSION
#define MTC_ABI_VERSION 14
#endif

#ifndef MTC_SOURCE_HASH
#error "build with -DMTC_SOURCE_HASH=<sha256 of the shim's sources> (native/build.sh)"
#endif
// Kept as one string in the binary, so that CI can read it from a binary it
// cannot load (another architecture) with grep.
static const char source_marker[] __attribute__((used)) = "MTC_SOURCE_HASH=" MTC_SOURCE_HASH;

#define GATHER_MODULE 0

MTC_EXPORT int32_t mtc_abi_version(void) { return MTC_ABI_VERSION; }

// The SHA-256 of the sources this binary was built from (native/build.sh).
MTC_EXPORT const char *mtc_source_hash(void) { return source_marker + strlen("MTC_SOURCE_HASH="); }

MTC_EXPORT const char *mtc_error_name(int32_t code) {
  switch (code) {
    case MTC_E_BAD_DEVICE: return "MTC_ERROR_BAD_DEVICE";
    case MTC_E_BAD_ARGUMENT: return "MTC_ERROR_BAD_ARGUMENT";
    case MTC_E_NO_DRIVER: return "MTC_ERROR_NO_DRIVER";
    case MTC_E_DRIVER_TOO_OLD: return "MTC_ERROR_DRIVER_TOO_OLD";
    case MTC_E_MISSING_SYMBOL: return "MTC_ERROR_MISSING_SYMBOL";
    case MTC_E_STOPPED: return "MTC_ERROR_STOPPED";
    case MTC_E_WRONG_DEVICE: return "MTC_ERROR_WRONG_DEVICE";
  }
  const char *name = NULL;
  if (mtc_cu.cuGetErrorName && mtc_cu.cuGetErrorName(code, &name) == CUDA_SUCCESS && name) {
    return name;
  }
  return "CUDA_ERROR_UNRECOGNIZED";
}

MTC_EXPORT const char *mtc_error_string(int32_t code) {
  switch (code) {
    case MTC_E_BAD_DEVICE: return "device index out of range";
    case MTC_E_BAD_ARGUMENT: return "invalid argument";
    case MTC_E_NO_DRIVER: return "the NVIDIA driver library libcuda.so.1 cannot be loaded";
    case MTC_E_DRIVER_TOO_OLD: return "the NVIDIA driver is too old";
    case MTC_E_MISSING_SYMBOL: return "the NVIDIA driver lacks an entry point the shim needs";
    case MTC_E_STOPPED: return "background staging was stopped: the program is ending";
    case MTC_E_WRONG_DEVICE: return "the stream belongs to another device or context";
  }
  const char *text = NULL;
  if (mtc_cu.cuGetErrorString && mtc_cu.cuGetErrorString(code, &text) == CUDA_SUCCESS && text) {
    return text;
  }
  return "unrecognized CUDA error code";
}

// Loads the driver if needed and says whether CUDA can be used: returns 0 or
// why not (MTC_E_NO_DRIVER, MTC_E_DRIVER_TOO_OLD, MTC_E_MISSING_SYMBOL, or a
// CUresult of cuInit). out: [driver's CUDA version (0: unknown), device
// count, the minimum driver version]. No device is status 0, count 0.
MTC_EXPORT int32_t mtc_cuda_status(int32_t *out) {
  int version = 0, count = 0;
  const char *detail;
  int st = mtc_driver_status(&version, &count, &detail);
  out[0] = version;
  out[1] = count;
  out[2] = MTC_MIN_DRIVER_VERSION;
  return st;
}

// The dynamic loader's message when libcuda.so.1 could not be opened, or
// the name of a missing driver entry point; "" otherwise.
MTC_EXPORT const char *mtc_cuda_status_detail(void) {
  int version, count;
  const char *detail;
  mtc_driver_status(&version, &count, &detail);
  return detail;
}

// Page-locked, portable and mapped host memory: any device may DMA from it
// and kernels may read it through its (UVA-identical) address.
MTC_EXPORT int32_t mtc_host_alloc(double bytes, double *out) {
  int st = mtc_use_device(0);
  if (st) return st;
  void *p = NULL;
  MTC_FAULT(MTC_FAULT_HOST_ALLOC);
  st = mtc_cu.cuMemHostAlloc(&p, (size_t)bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_HOST_ALLOCS);
  *out = ADDR(p);
  return 0;
}

MTC_EXPORT int32_t mtc_host_free(addr_t p) {
  int st = mtc_use_device(0);
  if (st) return st;
  return mtc_cu.cuMemFreeHost(PTR(p));
}

// Stream-ordered device allocation on the library stream of `device`.
MTC_EXPORT int32_t mtc_device_alloc(int32_t device, double bytes, double *out) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  CUdeviceptr p = 0;
  MTC_FAULT(MTC_FAULT_DEVICE_ALLOC);
  st = mtc_cu.cuMemAllocAsync(&p, (size_t)bytes, s);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_DEVICE_ALLOCS);
  *out = (double)p;
  return 0;
}

MTC_EXPORT int32_t mtc_device_free(int32_t device, addr_t p) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  return mtc_cu.cuMemFreeAsync(DPTR(p), s);
}

// Events belong to a device (its primary context): one recorded on another
// device's stream fails, so the device is explicit.
MTC_EXPORT int32_t mtc_event_create(int32_t device, double *out) {
  int st = mtc_use_device(device);
  if (st) return st;
  CUevent e;
  st = mtc_cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
  if (st) return st;
  *out = ADDR(e);
  return 0;
}

// The event calls make the event's device current first: driver API calls
// act on the calling thread's context, and the waits run on threads (Deno's
// blocking pool) that may not have one yet. Events are pooled for the life
// of the process (src/memory/event_pool.ts), so none is destroyed.
MTC_EXPORT int32_t mtc_event_record(int32_t device, addr_t e) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  MTC_FAULT(MTC_FAULT_EVENT_RECORD);
  return mtc_cu.cuEventRecord((CUevent)PTR(e), s);
}

// 0 when complete, CUDA_ERROR_NOT_READY (600) while pending, else the failure.
MTC_EXPORT int32_t mtc_event_query(int32_t device, addr_t e) {
  int st = mtc_use_device(device);
  if (st) return st;
  MTC_FAULT(MTC_FAULT_EVENT_QUERY);
  return mtc_cu.cuEventQuery((CUevent)PTR(e));
}

// Blocks the calling thread (a Deno blocking-pool thread) until `e` is done.
MTC_EXPORT int32_t mtc_event_synchronize(int32_t device, addr_t e) {
  int st = mtc_use_device(device);
  if (st) return st;
  MTC_FAULT(MTC_FAULT_EVENT_WAIT);
  return mtc_cu.cuEventSynchronize((CUevent)PTR(e));
}

// One async copy between CUDA-visible addresses (pinned host or device) on
// the stream of `device`, then (if `event` is not 0) an event record after
// it: the whole submission of a packed chunk in one call. With unified
// addressing the driver infers the direction from the addresses.
MTC_EXPORT int32_t mtc_copy_async(int32_t device, addr_t dst, addr_t src, double bytes, addr_t event) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (bytes > 0) {
    MTC_FAULT(MTC_FAULT_COPY);
    st = mtc_cu.cuMemcpyAsync(DPTR(dst), DPTR(src), (size_t)bytes, s);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  if (event) return mtc_cu.cuEventRecord((CUevent)PTR(event), s);
  return 0;
}

// Host-to-device copy straight from a JS buffer (pageable memory). For
// pageable sources the driver snapshots the bytes before returning, so the
// JS buffer may be reused as soon as this call returns.
MTC_EXPORT int32_t mtc_copy_from_buffer(int32_t device, addr_t dst, const uint8_t *src, double offset,
                                        double bytes) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (bytes <= 0) return 0;
  if (src == NULL) return MTC_E_BAD_ARGUMENT;
  MTC_FAULT(MTC_FAULT_COPY);
  st = mtc_cu.cuMemcpyHtoDAsync(DPTR(dst), src + (size_t)offset, (size_t)bytes, s);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_COPIES);
  return 0;
}

// Peer copy from `src` on `src_device` to `dst` on `dst_device`, ordered
// after all work already queued on both library streams, and later work on
// both streams ordered after it. Two scratch events fence it: `before_copy`
// (of dst_device), recorded on the destination's stream and waited for by
// the source's, so that the copy follows the destination's queued work; and
// `after_copy` (of src_device), recorded after the copy on the source's
// stream and waited for by the destination's.
MTC_EXPORT int32_t mtc_copy_peer(int32_t dst_device, addr_t dst, int32_t src_device, addr_t src,
                                 double bytes, addr_t before_copy, addr_t after_copy) {
  CUstream sd, ss;
  int st = mtc_stream_for(dst_device, &sd);
  if (st) return st;
  st = mtc_cu.cuEventRecord((CUevent)PTR(before_copy), sd);
  if (st) return st;
  st = mtc_stream_for(src_device, &ss);
  if (st) return st;
  st = mtc_cu.cuStreamWaitEvent(ss, (CUevent)PTR(before_copy), 0);
  if (st) return st;
  if (bytes > 0) {
    MTC_FAULT(MTC_FAULT_PEER_COPY);
    st = mtc_cu.cuMemcpyPeerAsync(DPTR(dst), mtc_context(dst_device), DPTR(src),
                                  mtc_context(src_device), (size_t)bytes, ss);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  st = mtc_cu.cuEventRecord((CUevent)PTR(after_copy), ss);
  if (st) return st;
  return mtc_cu.cuStreamWaitEvent(sd, (CUevent)PTR(after_copy), 0);
}

// The gather without device code: one device-to-device copy per entry. Used
// where the driver cannot load the fat binary (a driver older than the
// device code needs and no PTX JIT for it); correct, and slower.
static int gather_on_copy_engines(CUstream s, const struct mtc_gather_entry *table, int32_t count,
                                  addr_t dst) {
  for (int32_t i = 0; i < count; i++) {
    if (table[i].bytes <= 0) continue;
    int st = mtc_cu.cuMemcpyAsync(DPTR(dst) + (CUdeviceptr)table[i].dst_offset,
                                  DPTR(table[i].src), (size_t)table[i].bytes, s);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  return 0;
}

// Gathers `count` device tensors of `device` listed in `table` (pinned,
// mapped) into the packed device buffer `dst` (one kernel), then optionally
// copies `bytes` of it to `host_dst` (one transfer) and records `event`.
// This is how many small GPU tensors leave the device with one DMA.
MTC_EXPORT int32_t mtc_gather(int32_t device, addr_t table, int32_t count, addr_t dst, addr_t host_dst,
                              double bytes, addr_t event) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (count < 0) return MTC_E_BAD_ARGUMENT;
  if (count > 0) {
    CUfunction kernel = NULL;
    if (MTC_KERNELS_DISABLED() ||
        mtc_function(device, GATHER_MODULE, mtc_gather_fatbin, "mtc_gather_kernel", &kernel) != 0) {
      st = gather_on_copy_engines(s, (const struct mtc_gather_entry *)PTR(table), count, dst);
    } else {
      void *entries = PTR(table);
      void *out = PTR(dst);
      void *args[] = {&entries, &out};
      MTC_FAULT(MTC_FAULT_KERNEL);
      st = mtc_cu.cuLaunchKernel(kernel, (unsigned)count, 1, 1, 256, 1, 1, 0, s, args, NULL);
      if (st == 0) MTC_COUNT(MTC_COUNT_KERNELS);
    }
    if (st) return st;
  }
  if (host_dst && bytes > 0) {
    MTC_FAULT(MTC_FAULT_COPY);
    st = mtc_cu.cuMemcpyAsync(DPTR(host_dst), DPTR(dst), (size_t)bytes, s);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  if (event) return mtc_cu.cuEventRecord((CUevent)PTR(event), s);
  return 0;
}

// Gives device memory that was freed back to the OS. The library keeps
// freed memory in the device's stream-ordered pool (release threshold
// UINT64_MAX, so that steady-state allocations are cheap); this waits for
// the library stream (frees are stream-ordered) and trims that pool to what
// is still allocated.
MTC_EXPORT int32_t mtc_device_release_unused(int32_t device) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  CUresult err = mtc_cu.cuStreamSynchronize(s);
  CUdevice dev;
  CUmemoryPool pool;
  if (err == CUDA_SUCCESS) err = mtc_cu.cuDeviceGet(&dev, device);
  if (err == CUDA_SUCCESS) err = mtc_cu.cuDeviceGetDefaultMemPool(&pool, dev);
  if (err == CUDA_SUCCESS) err = mtc_cu.cuMemPoolTrimTo(pool, 0);
  return err;
}

// Waits until everything queued on the library stream of `device` is done.
MTC_EXPORT int32_t mtc_stream_synchronize(int32_t device) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  return mtc_cu.cuStreamSynchronize(s);
}
