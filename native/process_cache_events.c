// The cache of events: one is taken per copy and given back once its work
// completed; events live as long as the process and are reused by any
// isolate. Its own file as one of the caches (process_cache.c has the
// design note).

#define _POSIX_C_SOURCE 200809L  // as process_cache.c: one compile setting for the caches

#include "process_cache.h"

static int32_t event_capacity;

// An event of `device` for isolate `isolate`, cached or new: out[0] its
// handle, out[1] its id (for mtc_event_give). Events live as long as the
// process; completed ones are reused.
MTC_EXPORT int32_t mtc_event_take(int32_t device, int32_t isolate, double *out) {
  cache_init();
  if (device < 0 || device >= MTC_MAX_DEVICES) return MTC_E_BAD_DEVICE;
  pthread_mutex_lock(&cache_lock);
  int32_t i = idle_events[device];
  if (i != NONE) {
    idle_events[device] = events[i].next;
    events[i].owner = isolate;
    out[0] = events[i].handle;
    out[1] = i;
  }
  pthread_mutex_unlock(&cache_lock);
  if (i != NONE) return 0;
  double handle;
  int status = mtc_event_create(device, &handle);
  if (status) return status;
  pthread_mutex_lock(&cache_lock);
  if (grow((void **)&events, &event_capacity, event_used + 1, sizeof *events) == 0) {
    i = event_used++;
    events[i] = (struct event_rec){handle, device, isolate, NONE};
    seen_devices |= (uint64_t)1 << device;
  }
  pthread_mutex_unlock(&cache_lock);
  if (i == NONE) return MTC_E_BAD_ARGUMENT;
  out[0] = handle;
  out[1] = i;
  return 0;
}

// Gives event `id` back; the work it recorded must have completed.
MTC_EXPORT int32_t mtc_event_give(int32_t id) {
  pthread_mutex_lock(&cache_lock);
  int ok = id >= 0 && id < event_used && events[id].owner != IDLE;
  if (ok) {
    events[id].owner = IDLE;
    events[id].next = idle_events[events[id].device];
    idle_events[events[id].device] = id;
  }
  pthread_mutex_unlock(&cache_lock);
  return ok ? 0 : MTC_E_BAD_ARGUMENT;
}
