// The cache of idle pinned and device blocks: taking one, registering one
// an isolate allocated, giving one back (cached within its kind's cap, or
// freed), freeing one, and trimming the idle ones by age. Its own file
// because blocks are the caches' main business and their idle lists are
// theirs alone (process_cache.c has the design note).

#define _POSIX_C_SOURCE 200809L  // as process_cache.c: one compile setting for the caches

#include "process_cache.h"

static int32_t block_capacity, free_blocks = NONE;

void free_victim(struct victim v, int *status) {
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
// Pinned memory a JS view still reaches (a buffer the user moved) is never
// cached: dropped, its free waits for the view (host_views.c).
int cache_or_drop(int32_t i, double now, struct victim *victim) {
  struct block_rec *b = &blocks[i];
  if (counters[C_CACHED(b->kind)] + b->size <= caps[b->kind] &&
      !(b->kind == 0 && host_view_count(b->address) > 0)) {
    push_idle(i, now);
    return 1;
  }
  victim->address = b->address;
  victim->kind = b->kind;
  add_counter(C_HELD(b->kind), -b->size);
  release_record(i);
  return 0;
}

// Takes an idle block of exactly `size` bytes of kind `kind` (-1 pinned, d
// device d) for isolate `isolate`: out[0] its id (-1: none cached), out[1]
// its address.
MTC_EXPORT int32_t mtc_block_take(int32_t kind, int32_t isolate, double size, double *out) {
  cache_init();
  int k = kind_of(kind);
  if (k == NONE) return MTC_E_BAD_ARGUMENT;
  int l = list_of(size);
  pthread_mutex_lock(&cache_lock);
  int32_t i = idle_heads[k][l];
  while (i != NONE && blocks[i].size != size) i = blocks[i].next;
  if (i != NONE) {
    unlink_idle(i);
    blocks[i].owner = isolate;
    out[1] = blocks[i].address;
  }
  pthread_mutex_unlock(&cache_lock);
  out[0] = i;
  return 0;
}

// Registers a block `isolate` just allocated (`size` bytes of kind `kind`
// at `address`) and writes its id: from then on it can be given back here,
// and comes back here if the isolate ends holding it.
MTC_EXPORT int32_t mtc_block_adopt(int32_t kind, int32_t isolate, addr_t address, double size,
                                   double *out_id) {
  cache_init();
  int k = kind_of(kind);
  if (k == NONE) return MTC_E_BAD_ARGUMENT;
  pthread_mutex_lock(&cache_lock);
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
  pthread_mutex_unlock(&cache_lock);
  if (i == NONE) return MTC_E_BAD_ARGUMENT;
  *out_id = i;
  return 0;
}

static int valid_block(int32_t id) { return id >= 0 && id < block_used && blocks[id].kind != NONE; }

// Gives block `id` back: cached for any isolate, or freed when its kind's
// cache would pass `max_cached_bytes`. Pinned: no view of it may remain.
MTC_EXPORT int32_t mtc_block_give(int32_t id, double max_cached_bytes) {
  cache_init();
  struct victim victim;
  int status = 0;
  pthread_mutex_lock(&cache_lock);
  if (!valid_block(id) || blocks[id].owner == IDLE) {
    pthread_mutex_unlock(&cache_lock);
    return MTC_E_BAD_ARGUMENT;
  }
  caps[blocks[id].kind] = max_cached_bytes;
  int cached = cache_or_drop(id, now_ms(), &victim);
  pthread_mutex_unlock(&cache_lock);
  if (!cached) free_victim(victim, &status);
  return status;
}

// Frees block `id` now, held or cached. Pinned: no view of it may remain.
MTC_EXPORT int32_t mtc_block_free(int32_t id) {
  cache_init();
  struct victim victim;
  int status = 0;
  pthread_mutex_lock(&cache_lock);
  if (!valid_block(id)) {
    pthread_mutex_unlock(&cache_lock);
    return MTC_E_BAD_ARGUMENT;
  }
  if (blocks[id].owner == IDLE) unlink_idle(id);
  victim = (struct victim){blocks[id].address, blocks[id].kind};
  add_counter(C_HELD(blocks[id].kind), -blocks[id].size);
  release_record(id);
  pthread_mutex_unlock(&cache_lock);
  free_victim(victim, &status);
  return status;
}

// Frees the cached blocks of kind `kind` (-1 pinned, d device d, -2 every
// kind) that have been idle for `older_than_ms` or more; device memory goes
// back to the OS. out[0]: bytes freed; out[1]: ms until the next cached
// block of those kinds is that old (-1: none left).
MTC_EXPORT int32_t mtc_cache_trim(int32_t kind, double older_than_ms, double *out) {
  cache_init();
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
    pthread_mutex_lock(&cache_lock);
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
    pthread_mutex_unlock(&cache_lock);
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
