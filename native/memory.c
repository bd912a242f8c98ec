// Host and device memory: page-locked host blocks and stream-ordered device
// blocks, allocated, freed and given back to the OS. Its own file because
// it is what every pool of the library (src/memory/, process_cache*.c)
// allocates and frees through.

#include "shim.h"

// Frees the parked memory whose last JS view has died (host_views.c).
// The caller made a device current.
static int free_unviewed(void) {
  addr_t found[16];
  int status = 0, count;
  while ((count = host_take_unviewed(found, 16)) > 0) {
    for (int i = 0; i < count; i++) {
      int st = mtc_cu.cuMemFreeHost(PTR(found[i]));
      if (st && status == 0) status = st;
    }
  }
  return status;
}

// Page-locked, portable and mapped host memory: any device may DMA from it
// and kernels may read it through its (UVA-identical) address.
MTC_EXPORT int32_t mtc_host_alloc(double bytes, double *out) {
  int st = mtc_use_device(0);
  if (st) return st;
  free_unviewed();
  void *p = NULL;
  MTC_FAULT(MTC_FAULT_HOST_ALLOC);
  st = mtc_cu.cuMemHostAlloc(&p, (size_t)bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_HOST_ALLOCS);
  *out = ADDR(p);
  return 0;
}

// Frees `p`, or parks it while a JS view of it lives (a buffer the user
// moved with `transfer()` or `postMessage`): freed by a later call here.
MTC_EXPORT int32_t mtc_host_free(addr_t p) {
  int st = mtc_use_device(0);
  if (st) return st;
  st = host_park_if_viewed(p) ? 0 : mtc_cu.cuMemFreeHost(PTR(p));
  int unviewed = free_unviewed();
  return st ? st : unviewed;
}

int host_free_unviewed(void) {
  int st = mtc_use_device(0);
  return st ? st : free_unviewed();
}

// Stream-ordered device allocation on the library stream of `device`.
MTC_EXPORT int32_t mtc_device_alloc(int32_t device, double bytes, double *out) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  CUdeviceptr p = 0;
  MTC_FAULT(MTC_FAULT_DEVICE_ALLOC);
  st = mtc_cu.cuMemAllocAsync(&p, (size_t)bytes, s);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_DEVICE_ALLOCS);
  *out = (double)p;
  return 0;
}

MTC_EXPORT int32_t mtc_device_free(int32_t device, addr_t p) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  return mtc_cu.cuMemFreeAsync(DPTR(p), s);
}

// Gives device memory that was freed back to the OS. The library keeps
// freed memory in the device's stream-ordered pool (release threshold
// UINT64_MAX, so that steady-state allocations are cheap); this waits for
// the library stream (frees are stream-ordered) and trims that pool to what
// is still allocated.
MTC_EXPORT int32_t mtc_device_release_unused(int32_t device) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  CUresult err = mtc_cu.cuStreamSynchronize(s);
  CUdevice dev;
  CUmemoryPool pool;
  if (err == CUDA_SUCCESS) err = mtc_cu.cuDeviceGet(&dev, device);
  if (err == CUDA_SUCCESS) err = mtc_cu.cuDeviceGetDefaultMemPool(&pool, dev);
  if (err == CUDA_SUCCESS) err = mtc_cu.cuMemPoolTrimTo(pool, 0);
  return err;
}
