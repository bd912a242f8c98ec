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
// a live view is never cached for reuse.
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
  napi_status (*set_named_property)(napi_env, napi_value, const char *, napi_value);
  napi_status (*get_cb_info)(napi_env, napi_callback_info, size_t *, napi_value *, napi_value *,
                             void **);
  napi_status (*get_value_double)(napi_env, napi_value, double *);
  napi_status (*throw_error)(napi_env, const char *, const char *);
} napi;

struct view_rec {
  double address;
  double bytes;
  int32_t views;   // live JS buffers over the memory
  int32_t parked;  // freed once `views` reaches 0
};

struct unviewed_rec {
  double address;
  double bytes;
};

static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;
static struct view_rec *recs;
static int32_t rec_used, rec_capacity;
// Parked memory whose last view died: freed by the next call on a JS thread.
static struct unviewed_rec *unviewed;
static int32_t unviewed_used, unviewed_capacity;
static double parked_count, parked_bytes;  // parked, not freed yet

static int32_t find(double address) {
  for (int32_t i = 0; i < rec_used; i++) {
    if (recs[i].address == address) return i;
  }
  return NONE;
}

// A finalizer: the last buffer over one view's memory is gone. Runs on any
// thread, during a collection: only the tables change.
static void view_finalized(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  double address = ADDR(data);
  pthread_mutex_lock(&views_lock);
  int32_t i = find(address);
  if (i != NONE && --recs[i].views == 0) {
    int keep = 0;
    if (recs[i].parked) {
      if (grow((void **)&unviewed, &unviewed_capacity, unviewed_used + 1, sizeof *unviewed) == 0) {
        unviewed[unviewed_used++] = (struct unviewed_rec){address, recs[i].bytes};
      } else {
        keep = 1;  // no room to note it: a leak, never a free under a view
      }
    }
    if (!keep) recs[i] = recs[--rec_used];
  }
  pthread_mutex_unlock(&views_lock);
}

int host_viewed(addr_t address) {
  pthread_mutex_lock(&views_lock);
  int32_t i = find(address);
  int viewed = i != NONE && recs[i].views > 0;
  pthread_mutex_unlock(&views_lock);
  return viewed;
}

int32_t host_view_count(addr_t address) {
  pthread_mutex_lock(&views_lock);
  int32_t i = find(address);
  int32_t views = i == NONE ? 0 : recs[i].views;
  pthread_mutex_unlock(&views_lock);
  return views;
}

int host_park_if_viewed(addr_t address) {
  pthread_mutex_lock(&views_lock);
  int32_t i = find(address);
  int parked = i != NONE && (recs[i].views > 0 || recs[i].parked);
  if (parked && !recs[i].parked) {
    recs[i].parked = 1;
    parked_count++;
    parked_bytes += recs[i].bytes;
  }
  pthread_mutex_unlock(&views_lock);
  return parked;
}

int host_take_unviewed(addr_t *out, int capacity) {
  pthread_mutex_lock(&views_lock);
  int count = 0;
  while (unviewed_used > 0 && count < capacity) {
    struct unviewed_rec u = unviewed[--unviewed_used];
    out[count++] = u.address;
    parked_count--;
    parked_bytes -= u.bytes;
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
  int32_t i = find(address);
  if (i == NONE && grow((void **)&recs, &rec_capacity, rec_used + 1, sizeof *recs) == 0) {
    i = rec_used++;
    recs[i] = (struct view_rec){address, bytes, 0, 0};
  }
  if (i != NONE) recs[i].views++;
  pthread_mutex_unlock(&views_lock);
  napi_value buffer = NULL;
  if (i == NONE || napi.create_external_arraybuffer(env, PTR(address), (size_t)bytes,
                                                    view_finalized, NULL, &buffer) != 0) {
    if (i != NONE) view_finalized(env, PTR(address), NULL);
    napi.throw_error(env, NULL, "hostView: cannot make an ArrayBuffer over pinned memory");
    return NULL;
  }
  return buffer;
}

// The Node-API module's entry point (`process.dlopen`): exports hostView
// where the process provides Node-API, nothing otherwise.
MTC_EXPORT napi_value napi_register_module_v1(napi_env env, napi_value exports) {
#define RESOLVE(field, name) *(void **)&napi.field = dlsym(RTLD_DEFAULT, name)
  RESOLVE(create_external_arraybuffer, "napi_create_external_arraybuffer");
  RESOLVE(create_function, "napi_create_function");
  RESOLVE(set_named_property, "napi_set_named_property");
  RESOLVE(get_cb_info, "napi_get_cb_info");
  RESOLVE(get_value_double, "napi_get_value_double");
  RESOLVE(throw_error, "napi_throw_error");
#undef RESOLVE
  if (!napi.create_external_arraybuffer || !napi.create_function || !napi.set_named_property ||
      !napi.get_cb_info || !napi.get_value_double || !napi.throw_error) {
    return exports;
  }
  napi_value fn;
  if (napi.create_function(env, "hostView", 8, host_view, NULL, &fn) == 0) {
    napi.set_named_property(env, exports, "hostView", fn);
  }
  return exports;
}
