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
//   `unload`) may have left work queued on the library streams that reads
//   or writes what it held. Its staging calls are stopped, the streams of
//   every device the library used are synchronised, and only then does what
//   it held become idle. A staging call that does not stop in time keeps its
//   isolate's device blocks out of the cache for good (never reused under
//   it).
// - Idle blocks of a kind are kept up to the cap their pools name (the
//   pools' maxCachedBytes), then freed; `mtc_cache_trim` frees them by age
//   (the idle release) or all (releaseCachedMemory, exit).
//
// Everything is behind one mutex; none of it is on a copy's hot path but a
// take or a give of a device block (a lock, a list pop or push). Frees and
// stream waits happen outside the lock.

#define _POSIX_C_SOURCE 200809L  // clock_gettime

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "shim.h"
#include "stager.h"

// Exports of mtc.c this file builds on.
int32_t mtc_host_free(addr_t p);
int32_t mtc_device_free(int32_t device, addr_t p);
int32_t mtc_device_release_unused(int32_t device);
int32_t mtc_event_create(int32_t device, double *out);
int32_t mtc_stream_synchronize(int32_t device);

// Kinds of memory: 0 is pinned host memory, 1 + d the memory of device d.
// JavaScript names them -1 (pinned) and d.
#define KINDS (1 + MTC_MAX_DEVICES)
// Idle lists per kind: 0..63 hold blocks of 2^k bytes (the pools' size
// classes), the last one every other size (exact sizes of large blocks).
#define POW2_LISTS 64
#define LISTS (POW2_LISTS + 1)
#define NONE (-1)
#define IDLE 0        // the owner of a cached record
#define ABANDONED (-2)  // the owner of a stager whose staging call did not stop

// The counters JavaScript reads without a call (mapped once per isolate):
#define C_EPOCH 0              // bumped when an isolate asks all to free their idle fronts
#define C_STAGERS 1            // stagers alive
#define C_STAGER_BYTES 2       // their pinned slots' bytes
#define C_IDLE_STAGER_BYTES 3  // of which idle
#define C_CACHED(k) (4 + 2 * (k))  // idle bytes of kind k in the cache
#define C_HELD(k) (5 + 2 * (k))    // bytes of kind k registered here (in use anywhere + idle)
#define COUNTERS (4 + 2 * KINDS)

static double counters[COUNTERS];

struct block_rec {
  double address;
  double size;
  double idle_since;  // ms (CLOCK_MONOTONIC) while idle
  int32_t kind;       // NONE: a free record
  int32_t owner;      // the isolate that holds it, IDLE while cached
  int32_t next;       // idle list (or the free records' list)
  int32_t prev;
};

struct event_rec {
  double handle;
  int32_t device;
  int32_t owner;
  int32_t next;  // idle list of its device
};

struct stager_rec {
  double handle;
  double slot_bytes;
  double idle_since;
  int32_t device;
  int32_t slots;
  int32_t owner;  // IDLE while cached, NONE for a free record, or ABANDONED
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t isolate_key;

static struct block_rec *blocks;
static int32_t block_capacity, block_used, free_blocks = NONE;
static int32_t idle_heads[KINDS][LISTS];
static double caps[KINDS];  // the cap the last give named, per kind

static struct event_rec *events;
static int32_t event_capacity, event_used;
static int32_t idle_events[MTC_MAX_DEVICES];

static struct stager_rec *stagers;
static int32_t stager_capacity;

static int32_t next_isolate = 1;
static uint64_t seen_devices;  // devices whose library stream the cache's contents may use

static int exiting;       // set at process exit: isolate ends do nothing more
static int ends_running;  // isolate ends in progress

static void set_counter(int i, double value) { __atomic_store(&counters[i], &value, __ATOMIC_RELAXED); }
static void add_counter(int i, double delta) { set_counter(i, counters[i] + delta); }

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void isolate_thread_ended(void *value);

static void init_once(void) {
  for (int k = 0; k < KINDS; k++) {
    for (int l = 0; l < LISTS; l++) idle_heads[k][l] = NONE;
    caps[k] = 1e300;
  }
  for (int d = 0; d < MTC_MAX_DEVICES; d++) idle_events[d] = NONE;
  pthread_key_create(&isolate_key, isolate_thread_ended);
}

static void init(void) { pthread_once(&once, init_once); }

// The kind of JavaScript's kind number (-1 pinned, d device d), or NONE.
static int kind_of(int32_t js_kind) {
  if (js_kind < -1 || js_kind >= MTC_MAX_DEVICES) return NONE;
  return js_kind + 1;
}

static int list_of(double size) {
  uint64_t n = (uint64_t)size;
  if (n > 0 && (n & (n - 1)) == 0 && (double)n == size) return __builtin_ctzll(n);
  return POW2_LISTS;
}

// Grows `*array` (of `*capacity` elements of `size` bytes) to hold `need`.
static int grow(void **array, int32_t *capacity, int32_t need, size_t size) {
  if (need <= *capacity) return 0;
  int32_t capacity_next = *capacity ? *capacity * 2 : 256;
  while (capacity_next < need) capacity_next *= 2;
  void *grown = realloc(*array, (size_t)capacity_next * size);
  if (grown == NULL) return 1;
  *array = grown;
  *capacity = capacity_next;
  return 0;
}

// --- Isolates ---------------------------------------------------------------

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
  init();
  // Registered after the driver loaded, so that it runs before the
  // driver's own exit handlers: no isolate end calls into a torn-down driver.
  static int exit_handler;
  mtc_driver_load();
  if (__atomic_exchange_n(&exit_handler, 1, __ATOMIC_SEQ_CST) == 0) atexit(stop_ends_at_exit);
  pthread_mutex_lock(&lock);
  int32_t id = next_isolate++;
  pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    for (int32_t i = 0; i < stager_capacity && count < 64; i++) {
      if (stagers[i].owner != id) continue;
      found[count] = i;
      handles[count++] = stagers[i].handle;
    }
    pthread_mutex_unlock(&lock);
    if (count == 0) return status;
    // Every stager is told first, then waited for within one deadline.
    for (int i = 0; i < count; i++) mtc_stager_stop(handles[i], 0);
    double deadline = now_ms() + timeout_ms;
    for (int i = 0; i < count; i++) {
      double left = deadline - now_ms();
      stopped[i] = mtc_stager_stop(handles[i], left > 0 ? left : 0) == 0;
      if (!stopped[i]) status = 1;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < count; i++) {
      struct stager_rec *s = &stagers[found[i]];
      s->owner = stopped[i] ? NONE : ABANDONED;
      add_counter(C_STAGERS, -1);
      add_counter(C_STAGER_BYTES, -(double)s->slots * s->slot_bytes);
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < count; i++) {
      if (stopped[i]) mtc_stager_destroy(handles[i]);
    }
  }
}

struct victim {
  double address;
  int32_t kind;
};

static void free_victim(struct victim v, int *status) {
  int st = v.kind == 0 ? mtc_host_free(v.address) : mtc_device_free(v.kind - 1, v.address);
  if (st && *status == 0) *status = st;
}

static void release_record(int32_t i) {
  blocks[i].kind = NONE;
  blocks[i].owner = IDLE;
  blocks[i].next = free_blocks;
  free_blocks = i;
}

static void unlink_idle(int32_t i) {
  struct block_rec *b = &blocks[i];
  if (b->prev != NONE) {
    blocks[b->prev].next = b->next;
  } else {
    idle_heads[b->kind][list_of(b->size)] = b->next;
  }
  if (b->next != NONE) blocks[b->next].prev = b->prev;
  add_counter(C_CACHED(b->kind), -b->size);
}

static void push_idle(int32_t i, double now) {
  struct block_rec *b = &blocks[i];
  int32_t *head = &idle_heads[b->kind][list_of(b->size)];
  b->owner = IDLE;
  b->idle_since = now;
  b->prev = NONE;
  b->next = *head;
  if (*head != NONE) blocks[*head].prev = i;
  *head = i;
  add_counter(C_CACHED(b->kind), b->size);
}

// Whether caching record `i` keeps its kind within its cap; else the record
// is dropped and its memory goes to `*victim` to be freed (outside the lock).
static int cache_or_drop(int32_t i, double now, struct victim *victim) {
  struct block_rec *b = &blocks[i];
  if (counters[C_CACHED(b->kind)] + b->size <= caps[b->kind]) {
    push_idle(i, now);
    return 1;
  }
  victim->address = b->address;
  victim->kind = b->kind;
  add_counter(C_HELD(b->kind), -b->size);
  release_record(i);
  return 0;
}

// Gives back what isolate `id` holds; see the note at the top. Returns 0,
// or 1 when a staging call did not stop in time (its device blocks stay).
static int32_t isolate_end(int32_t id, double timeout_ms) {
  int staging_stuck = end_staging(id, timeout_ms);
  pthread_mutex_lock(&lock);
  int holds = 0;
  for (int32_t i = 0; i < block_used && !holds; i++) holds = blocks[i].owner == id;
  for (int32_t i = 0; i < event_used && !holds; i++) holds = events[i].owner == id;
  uint64_t devices = seen_devices;
  pthread_mutex_unlock(&lock);
  if (!holds) return staging_stuck;
  // The isolate's queued work may still use what it held.
  for (int d = 0; d < MTC_MAX_DEVICES; d++) {
    if (devices & ((uint64_t)1 << d)) mtc_stream_synchronize(d);
  }
  struct victim victims[64];
  int status = 0;
  for (int more = 1; more;) {
    int count = 0;
    more = 0;
    double now = now_ms();
    pthread_mutex_lock(&lock);
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
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < count; i++) free_victim(victims[i], &status);
  }
  return staging_stuck;
}

static void isolate_thread_ended(void *value) {
  int32_t id = (int32_t)(intptr_t)value;
  // Counted before the flag is read, and the exit handler sets the flag
  // before it reads the count: either this end sees the process exiting, or
  // the exit waits for it.
  __atomic_add_fetch(&ends_running, 1, __ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&exiting, __ATOMIC_SEQ_CST)) isolate_end(id, 2000);
  __atomic_sub_fetch(&ends_running, 1, __ATOMIC_SEQ_CST);
}

// Ends isolate `id` (at its `unload`, on its own thread): stops its staging
// calls (waiting at most `timeout_ms`), waits for the library streams, and
// caches what it still holds. Returns 0, or 1 when a staging call did not
// stop in time.
MTC_EXPORT int32_t mtc_isolate_end(int32_t id, double timeout_ms) {
  init();
  if ((intptr_t)pthread_getspecific(isolate_key) == id) pthread_setspecific(isolate_key, NULL);
  return isolate_end(id, timeout_ms);
}

// --- Blocks -----------------------------------------------------------------

// Takes an idle block of exactly `size` bytes of kind `kind` (-1 pinned, d
// device d) for isolate `isolate`: out[0] its id (-1: none cached), out[1]
// its address.
MTC_EXPORT int32_t mtc_block_take(int32_t kind, int32_t isolate, double size, double *out) {
  init();
  int k = kind_of(kind);
  if (k == NONE) return MTC_E_BAD_ARGUMENT;
  int l = list_of(size);
  pthread_mutex_lock(&lock);
  int32_t i = idle_heads[k][l];
  while (i != NONE && blocks[i].size != size) i = blocks[i].next;
  if (i != NONE) {
    unlink_idle(i);
    blocks[i].owner = isolate;
    out[1] = blocks[i].address;
  }
  pthread_mutex_unlock(&lock);
  out[0] = i;
  return 0;
}

// Registers a block `isolate` just allocated (`size` bytes of kind `kind`
// at `address`) and writes its id: from then on it can be given back here,
// and comes back here if the isolate ends holding it.
MTC_EXPORT int32_t mtc_block_adopt(int32_t kind, int32_t isolate, addr_t address, double size,
                                   double *out_id) {
  init();
  int k = kind_of(kind);
  if (k == NONE) return MTC_E_BAD_ARGUMENT;
  pthread_mutex_lock(&lock);
  int32_t i = free_blocks;
  if (i != NONE) {
    free_blocks = blocks[i].next;
  } else if (grow((void **)&blocks, &block_capacity, block_used + 1, sizeof *blocks) == 0) {
    i = block_used++;
  }
  if (i != NONE) {
    blocks[i] = (struct block_rec){address, size, 0, k, isolate, NONE, NONE};
    add_counter(C_HELD(k), size);
    if (kind >= 0) seen_devices |= (uint64_t)1 << kind;
  }
  pthread_mutex_unlock(&lock);
  if (i == NONE) return MTC_E_BAD_ARGUMENT;
  *out_id = i;
  return 0;
}

static int valid_block(int32_t id) { return id >= 0 && id < block_used && blocks[id].kind != NONE; }

// Gives block `id` back: cached for any isolate, or freed when its kind's
// cache would pass `max_cached_bytes`. Pinned: no view of it may remain.
MTC_EXPORT int32_t mtc_block_give(int32_t id, double max_cached_bytes) {
  init();
  struct victim victim;
  int status = 0;
  pthread_mutex_lock(&lock);
  if (!valid_block(id) || blocks[id].owner == IDLE) {
    pthread_mutex_unlock(&lock);
    return MTC_E_BAD_ARGUMENT;
  }
  caps[blocks[id].kind] = max_cached_bytes;
  int cached = cache_or_drop(id, now_ms(), &victim);
  pthread_mutex_unlock(&lock);
  if (!cached) free_victim(victim, &status);
  return status;
}

// Frees block `id` now, held or cached. Pinned: no view of it may remain.
MTC_EXPORT int32_t mtc_block_free(int32_t id) {
  init();
  struct victim victim;
  int status = 0;
  pthread_mutex_lock(&lock);
  if (!valid_block(id)) {
    pthread_mutex_unlock(&lock);
    return MTC_E_BAD_ARGUMENT;
  }
  if (blocks[id].owner == IDLE) unlink_idle(id);
  victim = (struct victim){blocks[id].address, blocks[id].kind};
  add_counter(C_HELD(blocks[id].kind), -blocks[id].size);
  release_record(id);
  pthread_mutex_unlock(&lock);
  free_victim(victim, &status);
  return status;
}

// Frees the cached blocks of kind `kind` (-1 pinned, d device d, -2 every
// kind) that have been idle for `older_than_ms` or more; device memory goes
// back to the OS. out[0]: bytes freed; out[1]: ms until the next cached
// block of those kinds is that old (-1: none left).
MTC_EXPORT int32_t mtc_cache_trim(int32_t kind, double older_than_ms, double *out) {
  init();
  int first = kind == -2 ? 0 : kind_of(kind), last = kind == -2 ? KINDS - 1 : first;
  if (first == NONE) return MTC_E_BAD_ARGUMENT;
  double freed = 0, next = -1;
  uint64_t trimmed_devices = 0;
  int status = 0;
  struct victim victims[64];
  for (int more = 1; more;) {
    int count = 0;
    more = 0;
    next = -1;
    double now = now_ms();
    pthread_mutex_lock(&lock);
    for (int k = first; k <= last && !more; k++) {
      if (counters[C_CACHED(k)] == 0) continue;
      for (int l = 0; l < LISTS && !more; l++) {
        for (int32_t i = idle_heads[k][l], after; i != NONE; i = after) {
          after = blocks[i].next;
          double due = blocks[i].idle_since + older_than_ms - now;
          if (due > 0) {
            if (next < 0 || due < next) next = due;
            continue;
          }
          if (count == 64) {
            more = 1;
            break;
          }
          unlink_idle(i);
          add_counter(C_HELD(k), -blocks[i].size);
          freed += blocks[i].size;
          victims[count++] = (struct victim){blocks[i].address, k};
          if (k > 0) trimmed_devices |= (uint64_t)1 << (k - 1);
          release_record(i);
        }
      }
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < count; i++) free_victim(victims[i], &status);
  }
  for (int d = 0; d < MTC_MAX_DEVICES; d++) {
    if (trimmed_devices & ((uint64_t)1 << d)) {
      int st = mtc_device_release_unused(d);
      if (st && status == 0) status = st;
    }
  }
  out[0] = freed;
  out[1] = next;
  return status;
}

// The counters (see C_* above), for JavaScript to map once: out[0] their
// address, out[1] how many doubles.
MTC_EXPORT int32_t mtc_cache_counters(double *out) {
  init();
  out[0] = ADDR(counters);
  out[1] = COUNTERS;
  return 0;
}

// Asks every isolate to free the idle blocks it keeps for itself (its
// pinned front, whose views only it can detach) at its next pool call.
MTC_EXPORT int32_t mtc_cache_request_flush(void) {
  pthread_mutex_lock(&lock);
  add_counter(C_EPOCH, 1);
  pthread_mutex_unlock(&lock);
  return 0;
}

// --- Events -----------------------------------------------------------------

// An event of `device` for isolate `isolate`, cached or new: out[0] its
// handle, out[1] its id (for mtc_event_give). Events live as long as the
// process; completed ones are reused.
MTC_EXPORT int32_t mtc_event_take(int32_t device, int32_t isolate, double *out) {
  init();
  if (device < 0 || device >= MTC_MAX_DEVICES) return MTC_E_BAD_DEVICE;
  pthread_mutex_lock(&lock);
  int32_t i = idle_events[device];
  if (i != NONE) {
    idle_events[device] = events[i].next;
    events[i].owner = isolate;
    out[0] = events[i].handle;
    out[1] = i;
  }
  pthread_mutex_unlock(&lock);
  if (i != NONE) return 0;
  double handle;
  int status = mtc_event_create(device, &handle);
  if (status) return status;
  pthread_mutex_lock(&lock);
  if (grow((void **)&events, &event_capacity, event_used + 1, sizeof *events) == 0) {
    i = event_used++;
    events[i] = (struct event_rec){handle, device, isolate, NONE};
    seen_devices |= (uint64_t)1 << device;
  }
  pthread_mutex_unlock(&lock);
  if (i == NONE) return MTC_E_BAD_ARGUMENT;
  out[0] = handle;
  out[1] = i;
  return 0;
}

// Gives event `id` back; the work it recorded must have completed.
MTC_EXPORT int32_t mtc_event_give(int32_t id) {
  pthread_mutex_lock(&lock);
  int ok = id >= 0 && id < event_used && events[id].owner != IDLE;
  if (ok) {
    events[id].owner = IDLE;
    events[id].next = idle_events[events[id].device];
    idle_events[events[id].device] = id;
  }
  pthread_mutex_unlock(&lock);
  return ok ? 0 : MTC_E_BAD_ARGUMENT;
}

// --- Background stagers -----------------------------------------------------

// A stager of `device` with `slots` slots of `slot_bytes` for isolate
// `isolate`: an idle one of that shape, or a new one; writes its handle.
MTC_EXPORT int32_t mtc_stager_take(int32_t device, int32_t isolate, int32_t slots, double slot_bytes,
                                   double *out) {
  init();
  if (device < 0 || device >= MTC_MAX_DEVICES) return MTC_E_BAD_DEVICE;
  pthread_mutex_lock(&lock);
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
  pthread_mutex_unlock(&lock);
  if (found != NONE) return 0;
  double handle;
  int status = mtc_stager_create(device, slots, slot_bytes, &handle);
  if (status) return status;
  pthread_mutex_lock(&lock);
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
  pthread_mutex_unlock(&lock);
  if (found == NONE) {
    mtc_stager_destroy(handle);
    return MTC_E_BAD_ARGUMENT;
  }
  *out = handle;
  return 0;
}

// Gives stager `stager` back (its staging call returned).
MTC_EXPORT int32_t mtc_stager_give(addr_t stager) {
  pthread_mutex_lock(&lock);
  int ok = 0;
  for (int32_t i = 0; i < stager_capacity && !ok; i++) {
    struct stager_rec *s = &stagers[i];
    if (s->handle != stager || s->owner <= IDLE) continue;
    s->owner = IDLE;
    s->idle_since = now_ms();
    add_counter(C_IDLE_STAGER_BYTES, (double)s->slots * s->slot_bytes);
    ok = 1;
  }
  pthread_mutex_unlock(&lock);
  return ok ? 0 : MTC_E_BAD_ARGUMENT;
}

// Frees the stagers idle for `older_than_ms` or more. out[0]: bytes freed;
// out[1]: ms until the next idle stager is that old (-1: none left).
MTC_EXPORT int32_t mtc_stagers_trim(double older_than_ms, double *out) {
  init();
  double freed = 0, next = -1;
  for (;;) {
    double victims[64];
    int count = 0;
    double now = now_ms();
    pthread_mutex_lock(&lock);
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
    pthread_mutex_unlock(&lock);
    if (count == 0) break;
    for (int i = 0; i < count; i++) mtc_stager_destroy(victims[i]);
  }
  out[0] = freed;
  out[1] = next;
  return 0;
}
