// Internal interface between the product shim (mtc.c and the files it
// lists) and the test-aid build (testaid.c), which is the product compiled
// with MTC_TEST_AIDS plus the aids' own exports. The product shim exports
// none of this.

#ifndef MTC_SHIM_H
#define MTC_SHIM_H

#include <stdint.h>

#include "driver.h"

#define MTC_EXPORT __attribute__((visibility("default")))

// Addresses, sizes and handles cross the FFI boundary as doubles: user-space
// and device addresses are below 2^48, so a double holds them exactly, and
// Deno passes doubles on its fast path with no BigInt or pointer object.
typedef double addr_t;
#define PTR(a) ((void *)(uintptr_t)(uint64_t)(a))
#define DPTR(a) ((CUdeviceptr)(uint64_t)(a))
#define ADDR(p) ((double)(uintptr_t)(p))

// Counters that the test aids read to prove that steady state allocates
// nothing: [host allocations, device allocations, copies, kernel launches].
#define MTC_COUNT_HOST_ALLOCS 0
#define MTC_COUNT_DEVICE_ALLOCS 1
#define MTC_COUNT_COPIES 2
#define MTC_COUNT_KERNELS 3
#ifdef MTC_TEST_AIDS
extern int64_t mtc_counts[4] MTC_HIDDEN;
// Set by a test aid: gathers take the copy-engine path, as they do where the
// driver cannot load the device code.
extern int mtc_kernels_disabled MTC_HIDDEN;
#define MTC_COUNT(which) __atomic_fetch_add(&mtc_counts[which], 1, __ATOMIC_RELAXED)
#define MTC_KERNELS_DISABLED() __atomic_load_n(&mtc_kernels_disabled, __ATOMIC_RELAXED)
// Fault injection (test aid): the next armed call at `site` fails with the
// armed CUresult instead of calling the driver.
int mtc_fault(int site) MTC_HIDDEN;
#define MTC_FAULT(site)                  \
  do {                                   \
    int injected_ = mtc_fault(site);     \
    if (injected_) return injected_;     \
  } while (0)
#else
#define MTC_COUNT(which) ((void)0)
#define MTC_KERNELS_DISABLED() 0
#define MTC_FAULT(site) ((void)0)
#endif

// Where faults can be injected (test aids; no-ops in the product).
#define MTC_FAULT_HOST_ALLOC 0
#define MTC_FAULT_DEVICE_ALLOC 1
#define MTC_FAULT_COPY 2
#define MTC_FAULT_KERNEL 3
#define MTC_FAULT_EVENT_RECORD 4
#define MTC_FAULT_EVENT_QUERY 5
#define MTC_FAULT_EVENT_WAIT 6
#define MTC_FAULT_PEER_COPY 7
#define MTC_FAULT_SITES 8

// host_views.c: JavaScript's views of pinned memory, counted (the note
// there says why). Memory with a live view is parked instead of freed, and
// freed after its last view died; such memory is never cached for reuse.
// How many live JS buffers view `address`.
MTC_HIDDEN int32_t host_view_count(addr_t address);
// Marks `address` to be freed when its last view dies; 1 when it was
// (the caller must not free it), 0 when no view remains.
MTC_HIDDEN int host_park_if_viewed(addr_t address);
// Takes up to `capacity` parked addresses whose views all died (to free).
MTC_HIDDEN int host_take_unviewed(addr_t *out, int capacity);
// memory.c: frees what host_take_unviewed() gives (makes device 0 current).
MTC_HIDDEN int host_free_unviewed(void);

#endif
