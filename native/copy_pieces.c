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

#define _GNU_SOURCE  // syscall()
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

// Helper threads at most (the calling thread copies too).
#define MTC_PIECES_MAX_HELPERS 15
// Pieces a thread claims at once: few atomic operations, small tail.
#define MTC_PIECES_CLAIM 8
// Pieces below this size are copied by memcpy, not streamed: non-temporal
// stores of a few cache lines cost more than the dirty lines they avoid
// (256 samples of the reference batch, pieces of 16 to ~500 bytes: 0.92x
// the copy's time on an H100 host, 0.40x on one core of a 2-core VM).
#define MTC_PIECES_STREAM_MIN 2048

static pthread_mutex_t callers = PTHREAD_MUTEX_INITIALIZER;  // one job at a time

// The current job, without a lock: helpers woken by a condition variable's
// broadcast each took its mutex in turn, and on an H100 host a call paid
// ~3 us per helper for it (4 MB in one call 89 us, in four 216-235:
// bench/pack_pieces.ts). `generation` counts the jobs posted; idle helpers
// sleep on it as a futex word. `state` holds JOB_OPEN while helpers may
// join and, below it, how many are inside the job; `slots`, how many more
// may join. The caller writes the table, the count and `next` before it
// opens the job (a release), and a helper reads them only after it joined
// (an acquire): a helper woken for an earlier job that joins this one
// copies this one's pieces. `next` is the next unclaimed piece.
#define JOB_OPEN (1 << 30)
static const double *job_table;
static int job_count;
static uint32_t generation;
static int state;
static int slots;
static int helpers_started;  // under `callers`
static int next;

static void futex_wait(uint32_t *word, uint32_t seen) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word, int waiters) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, waiters, NULL, NULL, 0);
}

static void cpu_relax(void) {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

// Copies one piece. On x86-64 with non-temporal stores from
// MTC_PIECES_STREAM_MIN bytes on: the DMA engine reads the chunk next, and
// lines left dirty in the copying cores' caches slowed that read (1000 x 4
// KB on an H100 lease: 0.91x the time end to end with these stores, in one
// process against plain memcpy). The caller fences.
static void copy_piece(uint8_t *dst, const uint8_t *src, size_t n) {
#if defined(__x86_64__)
  if (n < MTC_PIECES_STREAM_MIN) {
    memcpy(dst, src, n);
    return;
  }
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
  uint32_t seen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
  for (;;) {
    uint32_t posted = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (posted == seen) {
      // Returns at once if a job was posted since the load (no lost wake-up).
      futex_wait(&generation, seen);
      continue;
    }
    seen = posted;
    if (__atomic_sub_fetch(&slots, 1, __ATOMIC_ACQ_REL) < 0) continue;
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    while (s & JOB_OPEN) {
      if (__atomic_compare_exchange_n(&state, &s, s + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        copy_claimed(job_table, job_count);
        __atomic_sub_fetch(&state, 1, __ATOMIC_RELEASE);
        break;
      }
    }
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
    __atomic_store_n(&slots, helpers, __ATOMIC_RELAXED);
    __atomic_store_n(&state, JOB_OPEN, __ATOMIC_RELEASE);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    futex_wake(&generation, helpers);
  }
  copy_claimed(table, count);
  if (helpers > 0) {
    // Every piece is claimed: late helpers must not join a finished job, and
    // the ones inside finish their claims (a few pieces) before the table
    // may go.
    __atomic_and_fetch(&state, ~JOB_OPEN, __ATOMIC_ACQ_REL);
    for (int spins = 0; __atomic_load_n(&state, __ATOMIC_ACQUIRE) != 0; spins++) {
      if (spins < 4096) cpu_relax();
      else sched_yield();
    }
  }
  job_table = NULL;
  pthread_mutex_unlock(&callers);
  return 0;
}

// The address of a JS buffer argument (a TypedArray's first byte; 0 when
// detached or empty): one call on Deno's fast path, where
// Deno.UnsafePointer.of costs a slow call and a WeakMap entry.
MTC_EXPORT double mtc_address_of(const uint8_t *buffer) { return ADDR(buffer); }
