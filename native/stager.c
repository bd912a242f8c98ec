// Background stagers: a large pageable host-to-device copy moves through a
// few pinned slots, each slot's DMA queued as soon as it is filled, on a
// Deno blocking-pool thread while JavaScript goes on (src/staging/). The
// process-wide cache of idle stagers is process_cache_stagers.c's;
// stopping their calls at an isolate's end and at process exit is this
// file's.

#define _POSIX_C_SOURCE 200809L  // nanosleep

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"
#include "stager.h"

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
