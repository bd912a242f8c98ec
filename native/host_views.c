// JavaScript's views of pinned memory, counted, so that memory a view can
// still reach is never freed or given to another user.
//
// Why: an ArrayBuffer over pinned memory (a pool block mapped into JS, a
// host arena) is transferable. `buffer.transfer()`, `structuredClone` and
// `postMessage` with a transfer list move the memory into a new buffer,
// possibly in another isolate, and detach the one the library knows. A
// buffer made by `Deno.UnsafePointerView.getArrayBuffer` has no deleter, so
// nothing says when the moved buffer dies: freeing or reusing the memory
// then wrote into, or unmapped, memory a user still read (wrong bytes, or a
// crash after `releaseCachedMemory()`). Node-API's external ArrayBuffer
// carries a finalizer that V8 calls when the memory's last buffer is gone,
// wherever it went. Deno implements Node-API, so this file is also a
// Node-API module (loaded with `process.dlopen` on the same file, so it
// shares this library's state): `hostView(address, bytes)` makes such a
// buffer and counts it here until its finalizer runs.
//
// The rule the frees follow (memory.c, process_cache_blocks.c): memory with
// a live view is not freed but parked, and freed by the next host-memory
// call after its last view died (finalizers may run on a V8 thread in the
// middle of a collection, where no CUDA call belongs); a pinned block with
// a live view is never cached for reuse. A host arena's memory is handed to
// its views at birth (mtc_host_free_after_views): freed when its last
// buffer dies, even in a Worker that is ended, whose isolate runs no
// finalizer of the arena's own.
//
// Node-API's entry points come from the process (Deno exports them) through
// dlsym, not the link: the library also loads, and copies, where no
// Node-API is present, and then `hostView` is simply absent.

#define _GNU_SOURCE  // RTLD_DEFAULT
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "process_cache.h"

// The few Node-API types and entry points used here (node_api.h, ABI-stable).
typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status;
typedef void (*napi_finalize)(napi_env env, void *data, void *hint);
typedef napi_value (*napi_callback)(napi_env env, napi_callback_info info);

static struct {
  napi_status (*create_external_arraybuffer)(napi_env, void *, size_t, napi_finalize, void *,
                                             napi_value *);
  napi_status (*create_function)(napi_env, const char *, size_t, napi_callback, void *,
                                 napi_value *);
  napi_status (*create_double)(napi_env, double, napi_value *);
  napi_status (*set_named_property)(napi_env, napi_value, const char *, napi_value);
  napi_status (*get_cb_info)(napi_env, napi_callback_info, size_t *, napi_value *, napi_value *,
                             void **);
  napi_status (*get_value_double)(napi_env, napi_value, double *);
  napi_status (*throw_error)(napi_env, const char *, const char *);
} napi;

// What becomes of memory once its last view dies.
#define KEPT 0          // nothing: its owner frees it (a pool block, an arena without counting)
#define PARKED_MOVED 1  // freed: given up while a buffer a user moved reached it (counted)
#define PARKED_OWNED 2  // freed: owned by its views from the start (an arena, in any isolate)

struct view_rec {
  double address;  // 0: an empty slot
  double bytes;
  int32_t views;   // live JS buffers over the memory (+1 for each mtc_host_keep)
  int32_t parked;  // KEPT, PARKED_MOVED or PARKED_OWNED
};

struct unviewed_rec {
  double address;
  double bytes;
  int32_t moved;  // counted in parked_count while it waited
};

// The records, hashed by address (open addressing, linear probing, at most
// half full): a process may hold thousands of pinned blocks and arenas, and
// a lookup is on every pinned free and every block given to the cache.
static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;
static struct view_rec *table;
static uint32_t table_capacity;  // a power of two, or 0
static uint32_t table_used;
// Parked memory whose last view died: freed by the next call on a JS thread.
static struct unviewed_rec *unviewed;
static int32_t unviewed_used, unviewed_capacity;
static double parked_count, parked_bytes;  // PARKED_MOVED, not freed yet

static uint32_t slot_of(double address) {
  uint64_t key = (uint64_t)address;
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return (uint32_t)key & (table_capacity - 1);
}

static struct view_rec *find(double address) {
  if (table_capacity == 0 || address == 0) return NULL;  // 0 marks an empty slot
  for (uint32_t i = slot_of(address);; i = (i + 1) & (table_capacity - 1)) {
    if (table[i].address == address) return &table[i];
    if (table[i].address == 0) return NULL;
  }
}

// Room for one more record; 0, or -1 where memory ran out.
static int reserve(void) {
  if (2 * (table_used + 1) <= table_capacity) return 0;
  uint32_t capacity = table_capacity ? 2 * table_capacity : 64;
  struct view_rec *grown = calloc(capacity, sizeof *grown);
  if (grown == NULL) return -1;
  struct view_rec *old = table;
  uint32_t old_capacity = table_capacity;
  table = grown;
  table_capacity = capacity;
  for (uint32_t i = 0; i < old_capacity; i++) {
    if (old[i].address == 0) continue;
    uint32_t j = slot_of(old[i].address);
    while (table[j].address != 0) j = (j + 1) & (capacity - 1);
    table[j] = old[i];
  }
  free(old);
  return 0;
}

// The record of `address`, made (no views) where there is none; NULL where
// memory ran out.
static struct view_rec *find_or_add(double address, double bytes) {
  struct view_rec *found = find(address);
  if (found || reserve() != 0) return found;
  uint32_t i = slot_of(address);
  while (table[i].address != 0) i = (i + 1) & (table_capacity - 1);
  table[i] = (struct view_rec){address, bytes, 0, 0};
  table_used++;
  return &table[i];
}

// Removes a record, shifting later ones of its probe run back (no tombstones).
static void remove_rec(struct view_rec *rec) {
  uint32_t mask = table_capacity - 1;
  uint32_t hole = (uint32_t)(rec - table);
  for (uint32_t i = (hole + 1) & mask; table[i].address != 0; i = (i + 1) & mask) {
    uint32_t home = slot_of(table[i].address);
    // Move it into the hole unless its home lies cyclically in (hole, i].
    if (((i - home) & mask) >= ((i - hole) & mask)) {
      table[hole] = table[i];
      hole = i;
    }
  }
  table[hole].address = 0;
  table_used--;
}

// One view of `rec` fewer; parked memory with none left is queued to be freed.
static void drop_view(struct view_rec *rec) {
  if (--rec->views > 0) return;
  if (rec->parked) {
    if (grow((void **)&unviewed, &unviewed_capacity, unviewed_used + 1, sizeof *unviewed) != 0) {
      rec->views = 1;  // no room to note it: a leak, never a free under a view
      return;
    }
    unviewed[unviewed_used++] =
        (struct unviewed_rec){rec->address, rec->bytes, rec->parked == PARKED_MOVED};
    add_counter(C_UNVIEWED_BYTES, rec->bytes);
  }
  remove_rec(rec);
}

// A finalizer: the last buffer over one view's memory is gone. Runs on any
// thread, during a collection: only the tables change.
static void view_finalized(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  pthread_mutex_lock(&views_lock);
  struct view_rec *rec = find(ADDR(data));
  if (rec) drop_view(rec);
  pthread_mutex_unlock(&views_lock);
}

int32_t host_view_count(addr_t address) {
  pthread_mutex_lock(&views_lock);
  struct view_rec *rec = find(address);
  int32_t views = rec ? rec->views : 0;
  pthread_mutex_unlock(&views_lock);
  return views;
}

// Marks the record's memory as given up while a moved buffer reaches it.
static void park_moved(struct view_rec *rec) {
  if (rec->parked == PARKED_MOVED) return;
  rec->parked = PARKED_MOVED;
  parked_count++;
  parked_bytes += rec->bytes;
}

int host_park_if_viewed(addr_t address) {
  pthread_mutex_lock(&views_lock);
  struct view_rec *rec = find(address);
  int parked = rec != NULL && (rec->views > 0 || rec->parked);
  if (parked) park_moved(rec);
  pthread_mutex_unlock(&views_lock);
  return parked;
}

// Hands memory that hostView made a buffer over to its views: freed (by
// the next host-memory call on a JS thread) once its last buffer dies,
// wherever and however (a transfer(0), a collection, the teardown of the
// isolate that held it, which runs no finalizer of its own). `moved`: a
// buffer a user moved is what still reaches it (counted by
// mtc_host_parked). Where no view remains, nothing: memory handed over
// before was freed, or queued to be, when its last view died.
MTC_EXPORT int32_t mtc_host_free_after_views(addr_t address, int32_t moved) {
  pthread_mutex_lock(&views_lock);
  struct view_rec *rec = find(address);
  if (rec && rec->views > 0) {
    if (moved) park_moved(rec);
    else if (rec->parked == KEPT) rec->parked = PARKED_OWNED;
  }
  pthread_mutex_unlock(&views_lock);
  return 0;
}

int host_take_unviewed(addr_t *out, int capacity) {
  pthread_mutex_lock(&views_lock);
  int count = 0;
  while (unviewed_used > 0 && count < capacity) {
    struct unviewed_rec u = unviewed[--unviewed_used];
    out[count++] = u.address;
    if (u.moved) {
      parked_count--;
      parked_bytes -= u.bytes;
    }
    add_counter(C_UNVIEWED_BYTES, -u.bytes);
  }
  pthread_mutex_unlock(&views_lock);
  return count;
}

// Frees the parked memory whose views all died, then writes what stays
// parked behind live views: out[0] how many, out[1] their bytes.
MTC_EXPORT int32_t mtc_host_parked(double *out) {
  int st = host_free_unviewed();
  if (st) return st;
  pthread_mutex_lock(&views_lock);
  out[0] = parked_count;
  out[1] = parked_bytes;
  pthread_mutex_unlock(&views_lock);
  return 0;
}

// Counts a view of `bytes` at `address` that never dies: a buffer a user
// moved where the runtime gave no Node-API (an uncounted buffer). Its
// memory is then parked, never freed, when the library lets go of it: a
// leak, where freeing would pull the memory from under the moved buffer.
MTC_EXPORT int32_t mtc_host_keep(addr_t address, double bytes) {
  pthread_mutex_lock(&views_lock);
  struct view_rec *rec = find_or_add(address, bytes);
  if (rec) rec->views++;
  pthread_mutex_unlock(&views_lock);
  return rec ? 0 : CUDA_ERROR_OUT_OF_MEMORY;  // no room for the record
}

// Which ledger this is: the Node-API module that `process.dlopen` loaded
// must be this library, not a second copy of it (a file replaced on disk
// since), whose counts no free here would see.
MTC_EXPORT double mtc_host_ledger(void) { return ADDR(&views_lock); }

// hostView(address, bytes): an ArrayBuffer over `bytes` at `address`,
// counted until V8 drops its memory's last buffer.
static napi_value host_view(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  double address = 0, bytes = -1;
  if (napi.get_cb_info(env, info, &argc, argv, NULL, NULL) != 0 || argc < 2 ||
      napi.get_value_double(env, argv[0], &address) != 0 ||
      napi.get_value_double(env, argv[1], &bytes) != 0 || !(address > 0) || !(bytes >= 0)) {
    napi.throw_error(env, NULL, "hostView(address, bytes): a non-zero address and a size");
    return NULL;
  }
  pthread_mutex_lock(&views_lock);
  struct view_rec *rec = find_or_add(address, bytes);
  if (rec) rec->views++;
  pthread_mutex_unlock(&views_lock);
  napi_value buffer = NULL;
  if (rec == NULL || napi.create_external_arraybuffer(env, PTR(address), (size_t)bytes,
                                                      view_finalized, NULL, &buffer) != 0) {
    if (rec) view_finalized(env, PTR(address), NULL);
    napi.throw_error(env, NULL, "hostView: cannot make an ArrayBuffer over pinned memory");
    return NULL;
  }
  return buffer;
}

// Node-API's entry points, resolved once for every isolate that loads the module.
static pthread_once_t napi_once = PTHREAD_ONCE_INIT;
static int napi_ready;
static void resolve_napi(void) {
#define RESOLVE(field, name) *(void **)&napi.field = dlsym(RTLD_DEFAULT, name)
  RESOLVE(create_external_arraybuffer, "napi_create_external_arraybuffer");
  RESOLVE(create_function, "napi_create_function");
  RESOLVE(create_double, "napi_create_double");
  RESOLVE(set_named_property, "napi_set_named_property");
  RESOLVE(get_cb_info, "napi_get_cb_info");
  RESOLVE(get_value_double, "napi_get_value_double");
  RESOLVE(throw_error, "napi_throw_error");
#undef RESOLVE
  napi_ready = napi.create_external_arraybuffer && napi.create_function && napi.create_double &&
               napi.set_named_property && napi.get_cb_info && napi.get_value_double &&
               napi.throw_error;
}

// The Node-API module's entry point (`process.dlopen`, once per isolate):
// exports hostView, and `ledger` (mtc_host_ledger's value), where the
// process provides Node-API; nothing otherwise.
MTC_EXPORT napi_value napi_register_module_v1(napi_env env, napi_value exports) {
  pthread_once(&napi_once, resolve_napi);
  if (!napi_ready) return exports;
  napi_value fn, ledger;
  if (napi.create_function(env, "hostView", 8, host_view, NULL, &fn) == 0 &&
      napi.create_double(env, mtc_host_ledger(), &ledger) == 0) {
    napi.set_named_property(env, exports, "hostView", fn);
    napi.set_named_property(env, exports, "ledger", ledger);
  }
  return exports;
}
