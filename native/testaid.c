// Test aids, built only into native/build/libmtc_testaid.so together with
// the product sources (compiled with MTC_TEST_AIDS), never into the product
// shim: tests need the product's own streams, so the aids live in the same
// library as a separate build. Loaded by `deno task test` through
// MTC_SHIM_PATH; ffi/test_aids.ts wraps them.

#include <string.h>

#include "generated/test_aids_fatbin.h"
#include "shim.h"

// One function is cached per slot, so each aid kernel has its own.
#define DELAY_SLOT 1
#define SUM_SLOT 2
#define ILLEGAL_ADDRESS_SLOT 3

int64_t mtc_counts[4];
int mtc_kernels_disabled;

// One armed fault at a time: the call at `g_fault_site` after `g_fault_skip`
// more such calls fails with `g_fault_error`, once.
static int g_fault_site = -1;
static int g_fault_skip;
static int g_fault_error;

int mtc_fault(int site) {
  if (__atomic_load_n(&g_fault_site, __ATOMIC_ACQUIRE) != site) return 0;
  if (__atomic_sub_fetch(&g_fault_skip, 1, __ATOMIC_ACQ_REL) != -1) return 0;
  __atomic_store_n(&g_fault_site, -1, __ATOMIC_RELEASE);
  return g_fault_error;
}

// Arms a fault: the call at `site` (MTC_FAULT_*) after `skip` more calls there
// fails with `error` (a CUresult); `site` -1 disarms.
MTC_EXPORT int32_t mtc_inject_fault(int32_t site, int32_t skip, int32_t error) {
  if (site < -1 || site >= MTC_FAULT_SITES || skip < 0 || error == 0) return MTC_E_BAD_ARGUMENT;
  __atomic_store_n(&g_fault_site, -1, __ATOMIC_RELEASE);
  g_fault_skip = skip;
  g_fault_error = error;
  __atomic_store_n(&g_fault_site, site, __ATOMIC_RELEASE);
  return 0;
}

// Reads the counters: [host allocations, device allocations, copies,
// kernel launches] since the process started.
MTC_EXPORT void mtc_counters(double *out) {
  for (int i = 0; i < 4; i++) out[i] = (double)__atomic_load_n(&mtc_counts[i], __ATOMIC_RELAXED);
}

// Launches test-aid kernel `name` (cached in `slot`) on the library stream
// of `device`, one block of `threads` threads: the one launch path of the aids.
static int launch_aid(int device, int slot, const char *name, unsigned threads, void **args) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  CUfunction kernel;
  st = mtc_function(device, slot, mtc_test_aids_fatbin, name, &kernel);
  if (st) return st;
  return mtc_cu.cuLaunchKernel(kernel, 1, 1, 1, threads, 1, 1, 0, s, args, NULL);
}

// Queues the delay kernel on `stream` (any stream of `device`, e.g. a
// user's), so that what is queued after it there runs late for certain.
MTC_EXPORT int32_t mtc_delay_on(int32_t device, addr_t stream, double microseconds) {
  int st = mtc_use_device(device);
  if (st) return st;
  CUfunction kernel;
  st = mtc_function(device, DELAY_SLOT, mtc_test_aids_fatbin, "mtc_delay_kernel", &kernel);
  if (st) return st;
  uint64_t nanoseconds = (uint64_t)(microseconds * 1000.0);
  void *args[] = {&nanoseconds};
  return mtc_cu.cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, (CUstream)PTR(stream), args, NULL);
}

// A device-to-device copy queued on `stream` of `device`: a stand-in for a
// user's own FFI code that reads a tensor through its `ptr` on its stream.
MTC_EXPORT int32_t mtc_copy_on(int32_t device, addr_t stream, addr_t dst, addr_t src, double bytes) {
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu.cuMemcpyAsync(DPTR(dst), DPTR(src), (size_t)bytes, (CUstream)PTR(stream));
}

// Queues a one-thread kernel that keeps the library stream of `device` busy
// for `microseconds`, so that work queued after it is in flight for certain.
MTC_EXPORT int32_t mtc_delay_stream(int32_t device, double microseconds) {
  uint64_t nanoseconds = (uint64_t)(microseconds * 1000.0);
  void *args[] = {&nanoseconds};
  return launch_aid(device, DELAY_SLOT, "mtc_delay_kernel", 1, args);
}

// Synchronous device-to-host copy into a JS buffer, ordered after everything
// queued on the library stream: how tests read device bytes back without
// the code under test.
MTC_EXPORT int32_t mtc_copy_to_buffer(int32_t device, uint8_t *dst, double offset, addr_t src,
                                      double bytes) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (bytes <= 0) return 0;
  if (dst == NULL) return MTC_E_BAD_ARGUMENT;
  st = mtc_cu.cuMemcpyDtoHAsync(dst + (size_t)offset, DPTR(src), (size_t)bytes, s);
  if (st) return st;
  return mtc_cu.cuStreamSynchronize(s);
}

// Bytes of free and total device memory, for out-of-memory tests.
MTC_EXPORT int32_t mtc_mem_info(int32_t device, double *out) {
  int st = mtc_use_device(device);
  if (st) return st;
  size_t free_bytes = 0, total_bytes = 0;
  st = mtc_cu.cuMemGetInfo(&free_bytes, &total_bytes);
  if (st) return st;
  out[0] = (double)free_bytes;
  out[1] = (double)total_bytes;
  return 0;
}

// How many live JS buffers made by the Node-API `hostView` reach `address`
// (host_views.c's ledger; needs no driver).
MTC_EXPORT int32_t mtc_host_views(addr_t address) {
  return host_view_count(address);
}

// Makes gathers take the copy-engine path (1) or the kernel again (0), the
// path they take where the driver cannot load the device code.
MTC_EXPORT void mtc_disable_kernels(int32_t disabled) {
  __atomic_store_n(&mtc_kernels_disabled, disabled, __ATOMIC_RELAXED);
}

// Adds the `count` float32 values at device address `src` into the float at
// device address `dst`, on the library stream of `device` (ordered after the
// copies queued there): device code that consumes a copied batch.
MTC_EXPORT int32_t mtc_sum_f32(int32_t device, addr_t src, double count, addr_t dst) {
  void *source = PTR(src);
  uint64_t n = (uint64_t)count;
  void *target = PTR(dst);
  void *args[] = {&source, &n, &target};
  return launch_aid(device, SUM_SLOT, "mtc_sum_f32_kernel", 256, args);
}

// Launches a kernel that writes to an unmapped device address: a sticky
// CUDA_ERROR_ILLEGAL_ADDRESS on `device` from then on (a test in a process of
// its own). Returns the launch status; the fault surfaces at the next sync.
MTC_EXPORT int32_t mtc_trigger_illegal_address(int32_t device) {
  uint64_t address = 0x10;
  void *args[] = {&address};
  return launch_aid(device, ILLEGAL_ADDRESS_SLOT, "mtc_illegal_address_kernel", 1, args);
}
