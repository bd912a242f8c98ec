// The library's events: created per device, recorded on its copy stream,
// queried and waited for. Its own file because every completion the library
// reports (a copy's readiness, a pooled block's reuse) is one of these calls.

#include "shim.h"

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
