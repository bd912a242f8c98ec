// Streams for users' GPU work, ordering between streams on the GPU, and the
// wait for a library stream (mtc_stream_synchronize).
//
// Each device has two library streams: the copy stream (driver.c,
// mtc_stream_for), on which every copy and every stream-ordered free of the
// library is queued, and a default compute stream for users' kernels, so
// that the next copy overlaps them. Users may create streams or wrap one
// another library owns; every ordering between streams is an event recorded
// on one and waited for by the other (cuStreamWaitEvent), never a CPU wait.
// A wait captures the event's latest record when it is queued, so one
// scratch event may be recorded again at once: no event is handed out.

#include "shim.h"

#define STREAM(a) ((CUstream)PTR(a))
#define EVENT(a) ((CUevent)PTR(a))

static CUstream g_compute[MTC_MAX_DEVICES];

// The library stream of `device`: `which` 0 is the copy stream, 1 the
// default compute stream (non-blocking, created on first use).
MTC_EXPORT int32_t mtc_stream_library(int32_t device, int32_t which, double *out) {
  CUstream copy;
  int st = mtc_stream_for(device, &copy);
  if (st) return st;
  if (which == 0) {
    *out = ADDR(copy);
    return 0;
  }
  if (which != 1) return MTC_E_BAD_ARGUMENT;
  CUstream s = __atomic_load_n(&g_compute[device], __ATOMIC_ACQUIRE);
  if (s == NULL) {
    mtc_lock();
    s = g_compute[device];
    if (s == NULL) {
      st = mtc_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
      if (st == 0) __atomic_store_n(&g_compute[device], s, __ATOMIC_RELEASE);
    }
    mtc_unlock();
    if (st) return st;
  }
  *out = ADDR(s);
  return 0;
}

// A new non-blocking stream of `device` (its primary context).
MTC_EXPORT int32_t mtc_stream_create(int32_t device, double *out) {
  int st = mtc_use_device(device);
  if (st) return st;
  CUstream s;
  st = mtc_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  if (st) return st;
  *out = ADDR(s);
  return 0;
}

// Destroys a stream from mtc_stream_create; its queued work still completes.
MTC_EXPORT int32_t mtc_stream_destroy(int32_t device, addr_t stream) {
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu.cuStreamDestroy(STREAM(stream));
}

// 0 when `stream` (0: the legacy default stream) belongs to the primary
// context of `device`, MTC_E_WRONG_DEVICE when it belongs to another
// context, or the driver's error for a handle it does not know.
MTC_EXPORT int32_t mtc_stream_check(int32_t device, addr_t stream) {
  int st = mtc_use_device(device);
  if (st) return st;
  CUcontext ctx = NULL;
  st = mtc_cu.cuStreamGetCtx(STREAM(stream), &ctx);
  if (st) return st;
  return ctx == mtc_context(device) ? 0 : MTC_E_WRONG_DEVICE;
}

// 0 when all work queued on `stream` is done, CUDA_ERROR_NOT_READY (600)
// while some is pending, else the failure.
MTC_EXPORT int32_t mtc_stream_query(int32_t device, addr_t stream) {
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu.cuStreamQuery(STREAM(stream));
}

// Waits for `stream`; called as a nonblocking FFI call, on a Deno
// blocking-pool thread.
MTC_EXPORT int32_t mtc_stream_wait_idle(int32_t device, addr_t stream) {
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu.cuStreamSynchronize(STREAM(stream));
}

// Makes `waiter` (of `waiter_device`) wait, on the GPU, for the work queued
// so far on `signaler` (of `signal_device`): `event` (of `signal_device`)
// is recorded on `signaler` and waited for by `waiter`. Returns at once.
MTC_EXPORT int32_t mtc_stream_fence(int32_t waiter_device, addr_t waiter, int32_t signal_device,
                                    addr_t signaler, addr_t event) {
  int st = mtc_use_device(signal_device);
  if (st) return st;
  MTC_FAULT(MTC_FAULT_EVENT_RECORD);
  st = mtc_cu.cuEventRecord(EVENT(event), STREAM(signaler));
  if (st) return st;
  if (waiter_device != signal_device) {
    st = mtc_use_device(waiter_device);
    if (st) return st;
  }
  return mtc_cu.cuStreamWaitEvent(STREAM(waiter), EVENT(event), 0);
}

// Makes `stream` (of `device`) wait, on the GPU, for the latest record of
// `event` (of any device). Returns at once.
MTC_EXPORT int32_t mtc_stream_wait_event(int32_t device, addr_t stream, addr_t event) {
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu.cuStreamWaitEvent(STREAM(stream), EVENT(event), 0);
}

// Records `event` (of `device`) on `stream`.
MTC_EXPORT int32_t mtc_event_record_on(int32_t device, addr_t stream, addr_t event) {
  int st = mtc_use_device(device);
  if (st) return st;
  MTC_FAULT(MTC_FAULT_EVENT_RECORD);
  return mtc_cu.cuEventRecord(EVENT(event), STREAM(stream));
}

// Waits until everything queued on the library stream of `device` is done.
MTC_EXPORT int32_t mtc_stream_synchronize(int32_t device) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  return mtc_cu.cuStreamSynchronize(s);
}
