// @mtc/core native shim: a small, boring C ABI over the CUDA driver API.
//
// Every export is `mtc_*`, returns an int32 status (0 = OK, otherwise a
// CUresult or an MTC_E_* code) and writes results through out-pointers.
// The driver (libcuda.so.1) is opened with dlopen on first use (driver.c),
// so this library loads on any Linux machine and says why CUDA cannot be
// used where it cannot. Device code is compiled ahead of time into a fat
// binary embedded below and loaded with cuModuleLoadData. The exports are
// exactly the symbols of ffi/symbols.ts; test aids live in testaid.c.

#define _POSIX_C_SOURCE 200809L  // nanosleep

#include <stdlib.h>
#include <string.h>
#include <time.h>

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

// A stager: pinned slots and their events, which one staging call at a time
// uses to move pageable host memory to a device, pipelined: while the DMA
// of one slot runs, the next piece is copied into the next slot.
#define MTC_STAGER_MAX_SLOTS 8
struct mtc_stager {
  int device;
  int slots;
  int next;
  size_t slot_bytes;
  void *slot[MTC_STAGER_MAX_SLOTS];
  CUevent event[MTC_STAGER_MAX_SLOTS];
  int busy[MTC_STAGER_MAX_SLOTS];
  int stopped;  // see mtc_stager_stop
  int active;   // staging calls running on it
};

static void stop_staging_at_exit(void);

static void stager_free(struct mtc_stager *st) {
  for (int i = 0; i < st->slots; i++) {
    if (st->event[i]) {
      if (st->busy[i]) mtc_cu.cuEventSynchronize(st->event[i]);
      mtc_cu.cuEventDestroy(st->event[i]);
    }
    if (st->slot[i]) mtc_cu.cuMemFreeHost(st->slot[i]);
  }
  free(st);
}

// Creates a stager of `slots` pinned slots of `slot_bytes` for `device`.
MTC_EXPORT int32_t mtc_stager_create(int32_t device, int32_t slots, double slot_bytes, double *out) {
  if (slots < 1 || slots > MTC_STAGER_MAX_SLOTS || slot_bytes <= 0) return MTC_E_BAD_ARGUMENT;
  int status = mtc_use_device(device);
  if (status) return status;
  // Registered after the driver loaded (mtc_use_device above), so that it
  // runs before the driver's own exit handlers.
  static int exit_handler;
  if (__atomic_exchange_n(&exit_handler, 1, __ATOMIC_SEQ_CST) == 0) atexit(stop_staging_at_exit);
  struct mtc_stager *st = calloc(1, sizeof *st);
  if (st == NULL) return MTC_E_BAD_ARGUMENT;
  st->device = device;
  st->slots = slots;
  st->slot_bytes = (size_t)slot_bytes;
  for (int i = 0; i < slots && status == 0; i++) {
    status = mtc_cu.cuMemHostAlloc(&st->slot[i], st->slot_bytes, CU_MEMHOSTALLOC_PORTABLE);
    if (status == 0) {
      MTC_COUNT(MTC_COUNT_HOST_ALLOCS);
      status = mtc_cu.cuEventCreate(&st->event[i], CU_EVENT_DISABLE_TIMING);
    }
  }
  if (status) {
    stager_free(st);
    return status;
  }
  *out = ADDR(st);
  return 0;
}

// Waits for the stager's queued copies, then frees it.
MTC_EXPORT int32_t mtc_stager_destroy(addr_t stager) {
  struct mtc_stager *st = (struct mtc_stager *)PTR(stager);
  int status = mtc_use_device(st->device);
  if (status) return status;
  stager_free(st);
  return 0;
}

// Copies `bytes` of the JS buffer `src` (from `offset`) to device address
// `dst` through the stager's pinned slots, queueing each slot's copy on the
// library stream of the stager's device; returns once every piece is
// queued. Called as a nonblocking FFI call, on a Deno blocking-pool thread:
// Deno keeps `src`'s memory alive until it returns, even if JS detaches the
// buffer meanwhile, so the copy never reads freed memory. A buffer already
// detached arrives as NULL.
//
// Calls are counted while they run, per stager and in all, so that they can
// be stopped before anything they use is freed: the exit handler of the
// isolate that owns the stagers stops them (mtc_stager_stop), and at process
// exit a handler stops every call before the driver's own teardown. A
// process that exited 2-5 ms into a large pageable copy crashed 4 runs in 8
// (SIGSEGV) before.
static int g_staging_stopped;
static int g_staging_active;

static int staging_stopped(struct mtc_stager *st) {
  return __atomic_load_n(&g_staging_stopped, __ATOMIC_SEQ_CST) ||
         __atomic_load_n(&st->stopped, __ATOMIC_SEQ_CST);
}

// Waits until `*active` is 0, at most `timeout_ms`; 0 then, else 1.
static int32_t wait_idle(int *active, double timeout_ms) {
  struct timespec pause = {0, 100 * 1000};
  for (double waited = 0;; waited += 0.1) {
    if (__atomic_load_n(active, __ATOMIC_SEQ_CST) == 0) return 0;
    if (waited >= timeout_ms) return 1;
    nanosleep(&pause, NULL);
  }
}

static void stop_staging_at_exit(void) {
  __atomic_store_n(&g_staging_stopped, 1, __ATOMIC_SEQ_CST);
  wait_idle(&g_staging_active, 2000);
}

static int32_t stage_buffer(struct mtc_stager *st, addr_t dst, const uint8_t *src, double offset,
                            double bytes);

MTC_EXPORT int32_t mtc_stage_buffer(addr_t stager, addr_t dst, const uint8_t *src, double offset,
                                    double bytes) {
  struct mtc_stager *st = (struct mtc_stager *)PTR(stager);
  // Counted before the flags are read, and a stop sets its flag before it
  // reads the count (all sequentially consistent): either this call sees
  // the flag, or the stop sees this call and waits for it.
  __atomic_add_fetch(&st->active, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&g_staging_active, 1, __ATOMIC_SEQ_CST);
  int32_t status = MTC_E_STOPPED;
  if (!staging_stopped(st)) status = stage_buffer(st, dst, src, offset, bytes);
  __atomic_sub_fetch(&g_staging_active, 1, __ATOMIC_SEQ_CST);
  __atomic_sub_fetch(&st->active, 1, __ATOMIC_SEQ_CST);
  return status;
}

// Stops `stager` for good: a staging call on it that starts later returns
// MTC_E_STOPPED at once, a running one before its next slot. Returns 0 once
// none runs, or 1 if one still runs after `timeout_ms`.
MTC_EXPORT int32_t mtc_stager_stop(addr_t stager, double timeout_ms) {
  struct mtc_stager *st = (struct mtc_stager *)PTR(stager);
  __atomic_store_n(&st->stopped, 1, __ATOMIC_SEQ_CST);
  return wait_idle(&st->active, timeout_ms);
}

static int32_t stage_buffer(struct mtc_stager *st, addr_t dst, const uint8_t *src, double offset,
                            double bytes) {
  if (bytes <= 0) return 0;
  if (src == NULL) return MTC_E_BAD_ARGUMENT;
  CUstream s;
  int status = mtc_stream_for(st->device, &s);
  if (status) return status;
  size_t total = (size_t)bytes, done = 0;
  const uint8_t *from = src + (size_t)offset;
  while (done < total) {
    if (staging_stopped(st)) return MTC_E_STOPPED;
    int i = st->next;
    st->next = (st->next + 1) % st->slots;
    if (st->busy[i]) {
      status = mtc_cu.cuEventSynchronize(st->event[i]);
      if (status) return status;
      st->busy[i] = 0;
    }
    size_t n = total - done < st->slot_bytes ? total - done : st->slot_bytes;
    memcpy(st->slot[i], from + done, n);
    MTC_FAULT(MTC_FAULT_COPY);
    status = mtc_cu.cuMemcpyAsync(DPTR(dst) + done, (CUdeviceptr)(uintptr_t)st->slot[i], n, s);
    if (status) return status;
    MTC_COUNT(MTC_COUNT_COPIES);
    status = mtc_cu.cuEventRecord(st->event[i], s);
    if (status) return status;
    st->busy[i] = 1;
    done += n;
  }
  return 0;
}

// Peer copy from `src` on `src_device` to `dst` on `dst_device`, ordered
// after all work already queued on both library streams, and later work on
// both streams ordered after it. `fence_a` (of dst_device) and `fence_b` (of
// src_device) are scratch events.
MTC_EXPORT int32_t mtc_copy_peer(int32_t dst_device, addr_t dst, int32_t src_device, addr_t src,
                                 double bytes, addr_t fence_a, addr_t fence_b) {
  CUstream sd, ss;
  int st = mtc_stream_for(dst_device, &sd);
  if (st) return st;
  st = mtc_cu.cuEventRecord((CUevent)PTR(fence_a), sd);
  if (st) return st;
  st = mtc_stream_for(src_device, &ss);
  if (st) return st;
  st = mtc_cu.cuStreamWaitEvent(ss, (CUevent)PTR(fence_a), 0);
  if (st) return st;
  if (bytes > 0) {
    MTC_FAULT(MTC_FAULT_PEER_COPY);
    st = mtc_cu.cuMemcpyPeerAsync(DPTR(dst), mtc_context(dst_device), DPTR(src),
                                  mtc_context(src_device), (size_t)bytes, ss);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  st = mtc_cu.cuEventRecord((CUevent)PTR(fence_b), ss);
  if (st) return st;
  return mtc_cu.cuStreamWaitEvent(sd, (CUevent)PTR(fence_b), 0);
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
