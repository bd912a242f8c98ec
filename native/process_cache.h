// The process-wide caches' shared state and the helpers their files share
// (process_cache.c defines them and holds the design note). The caches are
// one structure under one mutex, split by what they cache: isolates
// (process_cache_isolates.c), blocks (_blocks.c), events (_events.c) and
// background stagers (_stagers.c); ending an isolate touches all of them.
// Internal to the library: everything here is MTC_HIDDEN or static inline,
// so the shim exports nothing more than before the split. Every field is
// read and written under cache_lock, but the counters, which JavaScript
// reads without a call.

#ifndef MTC_PROCESS_CACHE_H
#define MTC_PROCESS_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "shim.h"

// Exports of memory.c, events.c and streams.c the caches build on.
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
// Written under views_lock (host_views.c), where the others are written
// under cache_lock: each index has one lock that owns its writes.
#define C_UNVIEWED_BYTES (4 + 2 * KINDS)  // parked pinned bytes whose JS views all died (to free)
#define COUNTERS (5 + 2 * KINDS)

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

// The shared state (process_cache.c).
extern double counters[COUNTERS] MTC_HIDDEN;
extern pthread_mutex_t cache_lock MTC_HIDDEN;
extern pthread_key_t isolate_key MTC_HIDDEN;

extern struct block_rec *blocks MTC_HIDDEN;
extern int32_t block_used MTC_HIDDEN;
extern int32_t idle_heads[KINDS][LISTS] MTC_HIDDEN;
extern double caps[KINDS] MTC_HIDDEN;  // the cap the last give named, per kind

extern struct event_rec *events MTC_HIDDEN;
extern int32_t event_used MTC_HIDDEN;
extern int32_t idle_events[MTC_MAX_DEVICES] MTC_HIDDEN;

extern struct stager_rec *stagers MTC_HIDDEN;
extern int32_t stager_capacity MTC_HIDDEN;

extern uint64_t seen_devices MTC_HIDDEN;  // devices whose library stream the cache's contents may use

// Inline: a take or a give of a block is on a copy's hot path.
static inline void set_counter(int i, double value) {
  __atomic_store(&counters[i], &value, __ATOMIC_RELAXED);
}
static inline void add_counter(int i, double delta) { set_counter(i, counters[i] + delta); }

// The kind of JavaScript's kind number (-1 pinned, d device d), or NONE.
static inline int kind_of(int32_t js_kind) {
  if (js_kind < -1 || js_kind >= MTC_MAX_DEVICES) return NONE;
  return js_kind + 1;
}

static inline int list_of(double size) {
  uint64_t n = (uint64_t)size;
  if (n > 0 && (n & (n - 1)) == 0 && (double)n == size) return __builtin_ctzll(n);
  return POW2_LISTS;
}

// Sets up the lists and the thread-exit hook once; every entry point that
// may come first calls it.
MTC_HIDDEN void cache_init(void);
MTC_HIDDEN double now_ms(void);
MTC_HIDDEN int grow(void **array, int32_t *capacity, int32_t need, size_t size);

// process_cache_isolates.c: gives back what a Worker's isolate held when
// its thread ends (the pthread key's destructor).
MTC_HIDDEN void isolate_thread_ended(void *value);

// process_cache_blocks.c: what an isolate's end does with each block it
// held (cache it, or free it outside the lock).
struct victim {
  double address;
  int32_t kind;
};

MTC_HIDDEN void free_victim(struct victim v, int *status);
MTC_HIDDEN int cache_or_drop(int32_t i, double now, struct victim *victim);

#endif
