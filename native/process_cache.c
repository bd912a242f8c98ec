// Process-wide caches of the library's idle memory, events and background
// stagers, shared by every isolate of the process: the main thread, each
// Worker, each test module of `deno test`.
//
// Why here and not in JavaScript: each isolate has its own module
// instances, so a cache kept in JavaScript belongs to one isolate, and an
// isolate that ends without running JavaScript again strands it for the
// life of the process (Deno fires no `unload` in a Worker, and a terminated
// Worker runs no cleanup: three Workers that each moved 256 MiB left 768 MiB
// of device memory behind). Here every isolate's pools take idle blocks from
// and give them back to one cache per kind (pinned host memory; each
// device's memory), and the shim records which isolate holds what, so that
// what an isolate held comes back when its thread ends.
//
// Note [Reuse across isolates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// - Device blocks. Every use the library makes of a device block is queued
//   on the device's one library stream (driver.c), and that stream is the
//   process's, not an isolate's: all isolates load this one shim. So a
//   device block given back may be taken at once by any isolate, exactly as
//   within one: the stream orders the next user's work after the last one's.
// - Pinned blocks are given back only once the GPU is done with them (the
//   JS pools release staging after the copy's events completed; a pinned
//   output after its copy completed), so any isolate may write one at once.
//   JavaScript views of a block belong to the isolate that made them: an
//   isolate detaches its views before it gives a block back, so freeing a
//   cached block never leaves a view of freed memory anywhere.
// - An isolate that ends (its thread exits, or `mtc_isolate_end` at
//   `unload`) may have left work queued that reads or writes what it held:
//   copies on the library streams, kernels on its own streams. Its staging
//   calls are stopped, each device the library used is synchronised as a
//   whole (cuCtxSynchronize: other isolates' work is waited for too, with
//   no bound), and only then does what it held become idle. Pinned memory
//   a JS buffer still reaches (one a user moved) is never cached
//   (host_views.c). A staging call that does not stop in time keeps its
//   isolate's device blocks out of the cache for good (never reused under
//   it).
// - Idle blocks of a kind are kept up to the cap their pools name (the
//   pools' maxCachedBytes), then freed; `mtc_cache_trim` frees them by age
//   (the idle release) or all (releaseCachedMemory, exit).
//
// Everything is behind one mutex; none of it is on a copy's hot path but a
// take or a give of a device block (a lock, a list pop or push). Frees and
// stream waits happen outside the lock.
//
// This file holds that shared state, its lock and its set-up; the caches'
// entry points live in process_cache_isolates.c, _blocks.c, _events.c and
// _stagers.c, one file per kind of thing cached (process_cache.h names what
// they share).

#define _POSIX_C_SOURCE 200809L  // clock_gettime

#include <stdlib.h>
#include <time.h>

#include "process_cache.h"

double counters[COUNTERS];

pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
pthread_key_t isolate_key;

struct block_rec *blocks;
int32_t block_used;
int32_t idle_heads[KINDS][LISTS];
double caps[KINDS];

struct event_rec *events;
int32_t event_used;
int32_t idle_events[MTC_MAX_DEVICES];

struct stager_rec *stagers;
int32_t stager_capacity;

uint64_t seen_devices;

double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void init_once(void) {
  for (int k = 0; k < KINDS; k++) {
    for (int l = 0; l < LISTS; l++) idle_heads[k][l] = NONE;
    caps[k] = 1e300;
  }
  for (int d = 0; d < MTC_MAX_DEVICES; d++) idle_events[d] = NONE;
  pthread_key_create(&isolate_key, isolate_thread_ended);
}

void cache_init(void) { pthread_once(&once, init_once); }

// Grows `*array` (of `*capacity` elements of `size` bytes) to hold `need`.
int grow(void **array, int32_t *capacity, int32_t need, size_t size) {
  if (need <= *capacity) return 0;
  int32_t capacity_next = *capacity ? *capacity * 2 : 256;
  while (capacity_next < need) capacity_next *= 2;
  void *grown = realloc(*array, (size_t)capacity_next * size);
  if (grown == NULL) return 1;
  *array = grown;
  *capacity = capacity_next;
  return 0;
}

// The counters (see C_* in process_cache.h), for JavaScript to map once: out[0] their
// address, out[1] how many doubles.
MTC_EXPORT int32_t mtc_cache_counters(double *out) {
  cache_init();
  out[0] = ADDR(counters);
  out[1] = COUNTERS;
  return 0;
}

// Asks every isolate to free the idle blocks it keeps for itself (its
// pinned front, whose views only it can detach) at its next pool call.
MTC_EXPORT int32_t mtc_cache_request_flush(void) {
  pthread_mutex_lock(&cache_lock);
  add_counter(C_EPOCH, 1);
  pthread_mutex_unlock(&cache_lock);
  return 0;
}
