// Parallel host copies of many pieces: the packing of a large chunk into
// pinned memory. One core of the GPU hosts copies only 3-6 GB/s, so the
// packing of 1000 x 4 KB took 385 us on one thread of an H100 lease, four
// times its DMA. A few threads of this file share the pieces with the
// calling thread, which returns once every piece is copied.
//
// The caller (a synchronous FFI call) guarantees that the sources stay in
// place until it returns: JavaScript is blocked meanwhile, so nothing can
// detach or free them. No CUDA here: pinned memory is ordinary memory to
// the CPU.

#include <pthread.h>
#include <string.h>

#include "shim.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

// Helper threads at most (the calling thread copies too).
#define MTC_PIECES_MAX_HELPERS 15
// Pieces a thread claims at once: few atomic operations, small tail.
#define MTC_PIECES_CLAIM 8

static pthread_mutex_t callers = PTHREAD_MUTEX_INITIALIZER;  // one job at a time
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_posted = PTHREAD_COND_INITIALIZER;
static pthread_cond_t helpers_left = PTHREAD_COND_INITIALIZER;

// The current job, guarded by `lock` except `next`, the next unclaimed piece.
static const double *job_table;
static int job_count;
static int job_open;        // helpers may still join
static int helpers_wanted;  // joins still allowed
static int helpers_active;  // helpers inside the job
static unsigned long job_generation;
static int helpers_started;
static int next;

// Copies one piece. On x86-64 with non-temporal stores: the DMA engine reads
// the chunk next, and lines left dirty in the copying cores' caches slowed
// that read (1000 x 4 KB on an H100 lease: 0.91x the time end to end with
// these stores, in one process against plain memcpy). The caller fences.
static void copy_piece(uint8_t *dst, const uint8_t *src, size_t n) {
#if defined(__x86_64__)
  size_t i = (16 - ((uintptr_t)dst & 15)) & 15;
  if (i > n) i = n;
  memcpy(dst, src, i);
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
  if (i < n) memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

static void copy_claimed(const double *table, int count) {
  for (;;) {
    int first = __atomic_fetch_add(&next, MTC_PIECES_CLAIM, __ATOMIC_RELAXED);
    if (first >= count) break;
    int last = first + MTC_PIECES_CLAIM < count ? first + MTC_PIECES_CLAIM : count;
    for (int i = first; i < last; i++) {
      const double *entry = table + 3 * i;
      copy_piece(PTR(entry[1]), PTR(entry[0]), (size_t)entry[2]);
    }
  }
#if defined(__x86_64__)
  // Non-temporal stores are weakly ordered: make them visible before the
  // thread reports its part done (and the caller queues the DMA).
  _mm_sfence();
#endif
}

static void *helper_main(void *unused) {
  (void)unused;
  unsigned long seen = 0;
  pthread_mutex_lock(&lock);
  for (;;) {
    if (job_open && helpers_wanted > 0 && seen != job_generation) {
      seen = job_generation;
      helpers_wanted--;
      helpers_active++;
      const double *table = job_table;
      int count = job_count;
      pthread_mutex_unlock(&lock);
      copy_claimed(table, count);
      pthread_mutex_lock(&lock);
      if (--helpers_active == 0) pthread_cond_signal(&helpers_left);
      continue;
    }
    pthread_cond_wait(&job_posted, &lock);
  }
  return NULL;
}

// Copies `count` pieces, each three doubles in `table`: source address,
// destination address, bytes; with up to `threads` threads, the calling one
// included. Returns once every piece is copied. Where a helper thread
// cannot be started, fewer threads copy (never an error).
MTC_EXPORT int32_t mtc_copy_pieces(const double *table, int32_t count, int32_t threads) {
  if (count <= 0) return 0;
  if (table == NULL) return MTC_E_BAD_ARGUMENT;
  int helpers = threads - 1;
  if (helpers > MTC_PIECES_MAX_HELPERS) helpers = MTC_PIECES_MAX_HELPERS;
  if (helpers > (count - 1) / MTC_PIECES_CLAIM) helpers = (count - 1) / MTC_PIECES_CLAIM;
  pthread_mutex_lock(&callers);
  pthread_mutex_lock(&lock);
  while (helpers_started < helpers) {
    pthread_t thread;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr)) break;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int failed = pthread_create(&thread, &attr, helper_main, NULL);
    pthread_attr_destroy(&attr);
    if (failed) break;
    helpers_started++;
  }
  if (helpers > helpers_started) helpers = helpers_started;
  job_table = table;
  job_count = count;
  __atomic_store_n(&next, 0, __ATOMIC_RELAXED);
  if (helpers > 0) {
    job_open = 1;
    helpers_wanted = helpers;
    job_generation++;
    pthread_cond_broadcast(&job_posted);
  }
  pthread_mutex_unlock(&lock);
  copy_claimed(table, count);
  pthread_mutex_lock(&lock);
  // Every piece is claimed: late helpers must not join a finished job, and
  // the ones inside finish their claims before the table may go.
  job_open = 0;
  helpers_wanted = 0;
  while (helpers_active > 0) pthread_cond_wait(&helpers_left, &lock);
  job_table = NULL;
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&callers);
  return 0;
}

// The address of a JS buffer argument (a TypedArray's first byte; 0 when
// detached or empty): one call on Deno's fast path, where
// Deno.UnsafePointer.of costs a slow call and a WeakMap entry.
MTC_EXPORT double mtc_address_of(const uint8_t *buffer) { return ADDR(buffer); }
