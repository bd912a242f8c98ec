// The cache of background stagers (stager.c): an idle one of the asked
// shape is lent again, else a new one is made; idle ones are freed by age.
// Its own file as one of the caches (process_cache.c has the design note;
// an isolate's end stops its stagers in process_cache_isolates.c).

#define _POSIX_C_SOURCE 200809L  // as process_cache.c: one compile setting for the caches

#include "process_cache.h"
#include "stager.h"

// A stager of `device` with `slots` slots of `slot_bytes` for isolate
// `isolate`: an idle one of that shape, or a new one; writes its handle.
MTC_EXPORT int32_t mtc_stager_take(int32_t device, int32_t isolate, int32_t slots, double slot_bytes,
                                   double *out) {
  cache_init();
  if (device < 0 || device >= MTC_MAX_DEVICES) return MTC_E_BAD_DEVICE;
  pthread_mutex_lock(&cache_lock);
  int32_t found = NONE;
  for (int32_t i = 0; i < stager_capacity && found == NONE; i++) {
    struct stager_rec *s = &stagers[i];
    if (s->owner == IDLE && s->device == device && s->slots == slots && s->slot_bytes == slot_bytes) {
      found = i;
    }
  }
  if (found != NONE) {
    stagers[found].owner = isolate;
    add_counter(C_IDLE_STAGER_BYTES, -(double)slots * slot_bytes);
    *out = stagers[found].handle;
  }
  pthread_mutex_unlock(&cache_lock);
  if (found != NONE) return 0;
  double handle;
  int status = mtc_stager_create(device, slots, slot_bytes, &handle);
  if (status) return status;
  pthread_mutex_lock(&cache_lock);
  for (int32_t i = 0; i < stager_capacity && found == NONE; i++) {
    if (stagers[i].owner == NONE) found = i;
  }
  if (found == NONE) {
    int32_t old = stager_capacity;
    if (grow((void **)&stagers, &stager_capacity, old + 1, sizeof *stagers) == 0) {
      for (int32_t i = old; i < stager_capacity; i++) stagers[i].owner = NONE;
      found = old;
    }
  }
  if (found != NONE) {
    stagers[found] = (struct stager_rec){handle, slot_bytes, 0, device, slots, isolate};
    add_counter(C_STAGERS, 1);
    add_counter(C_STAGER_BYTES, (double)slots * slot_bytes);
    seen_devices |= (uint64_t)1 << device;
  }
  pthread_mutex_unlock(&cache_lock);
  if (found == NONE) {
    mtc_stager_destroy(handle);
    return MTC_E_BAD_ARGUMENT;
  }
  *out = handle;
  return 0;
}

// Gives stager `stager` back (its staging call returned).
MTC_EXPORT int32_t mtc_stager_give(addr_t stager) {
  pthread_mutex_lock(&cache_lock);
  int ok = 0;
  for (int32_t i = 0; i < stager_capacity && !ok; i++) {
    struct stager_rec *s = &stagers[i];
    if (s->handle != stager || s->owner <= IDLE) continue;
    s->owner = IDLE;
    s->idle_since = now_ms();
    add_counter(C_IDLE_STAGER_BYTES, (double)s->slots * s->slot_bytes);
    ok = 1;
  }
  pthread_mutex_unlock(&cache_lock);
  return ok ? 0 : MTC_E_BAD_ARGUMENT;
}

// Frees the stagers idle for `older_than_ms` or more. out[0]: bytes freed;
// out[1]: ms until the next idle stager is that old (-1: none left).
MTC_EXPORT int32_t mtc_stagers_trim(double older_than_ms, double *out) {
  cache_init();
  double freed = 0, next = -1;
  for (;;) {
    double victims[64];
    int count = 0;
    double now = now_ms();
    pthread_mutex_lock(&cache_lock);
    next = -1;
    for (int32_t i = 0; i < stager_capacity && count < 64; i++) {
      struct stager_rec *s = &stagers[i];
      if (s->owner != IDLE) continue;
      double due = s->idle_since + older_than_ms - now;
      if (due > 0) {
        if (next < 0 || due < next) next = due;
        continue;
      }
      double bytes = (double)s->slots * s->slot_bytes;
      victims[count++] = s->handle;
      s->owner = NONE;
      freed += bytes;
      add_counter(C_STAGERS, -1);
      add_counter(C_STAGER_BYTES, -bytes);
      add_counter(C_IDLE_STAGER_BYTES, -bytes);
    }
    pthread_mutex_unlock(&cache_lock);
    if (count == 0) break;
    for (int i = 0; i < count; i++) mtc_stager_destroy(victims[i]);
  }
  out[0] = freed;
  out[1] = next;
  return 0;
}
