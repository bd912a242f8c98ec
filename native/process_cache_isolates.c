// The isolates the process caches serve: registering one (the main thread,
// a Worker, a test module), and ending one, at its `unload` or when its
// thread exits, which stops its staging calls and gives back what it held
// (process_cache.c has the note on why this is safe). Its own file because
// an isolate's end is the one path that crosses every cache.

#define _POSIX_C_SOURCE 200809L  // nanosleep

#include <stdlib.h>
#include <time.h>

#include "process_cache.h"
#include "stager.h"

static int32_t next_isolate = 1;

static int exiting;       // set at process exit: isolate ends do nothing more
static int ends_running;  // isolate ends in progress

static void stop_ends_at_exit(void) {
  __atomic_store_n(&exiting, 1, __ATOMIC_SEQ_CST);
  struct timespec pause = {0, 100 * 1000};
  for (int i = 0; i < 20000 && __atomic_load_n(&ends_running, __ATOMIC_SEQ_CST) > 0; i++) {
    nanosleep(&pause, NULL);
  }
}

// Registers the calling thread's isolate and writes its id (>= 1). When
// the thread ends (a Worker ends, terminated or not), whatever the isolate
// still holds comes back to the caches (see isolate_end).
MTC_EXPORT int32_t mtc_isolate_attach(double *out_id) {
  cache_init();
  // Registered after the driver loaded, so that it runs before the
  // driver's own exit handlers: no isolate end calls into a torn-down driver.
  static int exit_handler;
  mtc_driver_load();
  if (__atomic_exchange_n(&exit_handler, 1, __ATOMIC_SEQ_CST) == 0) atexit(stop_ends_at_exit);
  pthread_mutex_lock(&cache_lock);
  int32_t id = next_isolate++;
  pthread_mutex_unlock(&cache_lock);
  // One isolate runs on a thread at a time; an earlier one on this thread
  // that did not end explicitly keeps what it holds (never reused under it).
  pthread_setspecific(isolate_key, (void *)(intptr_t)id);
  *out_id = id;
  return 0;
}

// Stops and frees the stagers `id` holds; 0 once all stopped, else 1 (the
// ones still running are kept by no one, for good: never reused under them).
static int end_staging(int32_t id, double timeout_ms) {
  int status = 0;
  for (;;) {
    int32_t found[64];
    double handles[64];
    int stopped[64];
    int count = 0;
    pthread_mutex_lock(&cache_lock);
    for (int32_t i = 0; i < stager_capacity && count < 64; i++) {
      if (stagers[i].owner != id) continue;
      found[count] = i;
      handles[count++] = stagers[i].handle;
    }
    pthread_mutex_unlock(&cache_lock);
    if (count == 0) return status;
    // Every stager is told first, then waited for within one deadline.
    for (int i = 0; i < count; i++) mtc_stager_stop(handles[i], 0);
    double deadline = now_ms() + timeout_ms;
    for (int i = 0; i < count; i++) {
      double left = deadline - now_ms();
      stopped[i] = mtc_stager_stop(handles[i], left > 0 ? left : 0) == 0;
      if (!stopped[i]) status = 1;
    }
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < count; i++) {
      struct stager_rec *s = &stagers[found[i]];
      s->owner = stopped[i] ? NONE : ABANDONED;
      add_counter(C_STAGERS, -1);
      add_counter(C_STAGER_BYTES, -(double)s->slots * s->slot_bytes);
    }
    pthread_mutex_unlock(&cache_lock);
    for (int i = 0; i < count; i++) {
      if (stopped[i]) mtc_stager_destroy(handles[i]);
    }
  }
}

// Waits for all work queued on `device`'s primary context: the library's
// streams and every other stream (users' streams, where their kernels read
// and write the blocks an ending isolate held). Where the driver lacks
// cuCtxSynchronize (stand-in drivers), the library stream only.
static void drain_device(int device) {
  if (mtc_cu_optional.cuCtxSynchronize == NULL || mtc_use_device(device) != 0) {
    mtc_stream_synchronize(device);
    return;
  }
  mtc_cu_optional.cuCtxSynchronize();
}

// Gives back what isolate `id` holds; see the note in process_cache.c. Returns 0,
// or 1 when a staging call did not stop in time (its device blocks stay).
static int32_t isolate_end(int32_t id, double timeout_ms) {
  int staging_stuck = end_staging(id, timeout_ms);
  pthread_mutex_lock(&cache_lock);
  int holds = 0;
  for (int32_t i = 0; i < block_used && !holds; i++) holds = blocks[i].owner == id;
  for (int32_t i = 0; i < event_used && !holds; i++) holds = events[i].owner == id;
  uint64_t devices = seen_devices;
  pthread_mutex_unlock(&cache_lock);
  if (!holds) return staging_stuck;
  // The isolate's queued work may still use what it held: its copies, and
  // its kernels on its own streams (a context-wide wait: other isolates'
  // work is waited for too, once, as an isolate ends).
  for (int d = 0; d < MTC_MAX_DEVICES; d++) {
    if (devices & ((uint64_t)1 << d)) drain_device(d);
  }
  struct victim victims[64];
  int status = 0;
  for (int more = 1; more;) {
    int count = 0;
    more = 0;
    double now = now_ms();
    pthread_mutex_lock(&cache_lock);
    for (int32_t i = 0; i < block_used; i++) {
      if (blocks[i].owner != id || (staging_stuck && blocks[i].kind != 0)) continue;
      if (count == 64) {
        more = 1;
        break;
      }
      if (!cache_or_drop(i, now, &victims[count])) count++;
    }
    for (int32_t i = 0; i < event_used; i++) {
      if (events[i].owner != id) continue;
      events[i].owner = IDLE;
      events[i].next = idle_events[events[i].device];
      idle_events[events[i].device] = i;
    }
    pthread_mutex_unlock(&cache_lock);
    for (int i = 0; i < count; i++) free_victim(victims[i], &status);
  }
  return staging_stuck;
}

void isolate_thread_ended(void *value) {
  int32_t id = (int32_t)(intptr_t)value;
  // Counted before the flag is read, and the exit handler sets the flag
  // before it reads the count: either this end sees the process exiting, or
  // the exit waits for it.
  __atomic_add_fetch(&ends_running, 1, __ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&exiting, __ATOMIC_SEQ_CST)) isolate_end(id, 2000);
  __atomic_sub_fetch(&ends_running, 1, __ATOMIC_SEQ_CST);
}

// Ends isolate `id` (at its `unload`, on its own thread): stops its staging
// calls (waiting at most `timeout_ms`), waits for every device's queued
// work (drain_device), and caches what it still holds. Returns 0, or 1
// when a staging call did not stop in time.
MTC_EXPORT int32_t mtc_isolate_end(int32_t id, double timeout_ms) {
  cache_init();
  if ((intptr_t)pthread_getspecific(isolate_key) == id) pthread_setspecific(isolate_key, NULL);
  return isolate_end(id, timeout_ms);
}
