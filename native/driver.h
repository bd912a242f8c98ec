// The shim's view of the CUDA driver: loading libcuda.so.1 on first use,
// the reason when it cannot be used, and per-device state (primary context,
// the library's stream, loaded device code). Shared by the product shim and
// the test-aid build; nothing here is exported from the library.

#ifndef MTC_DRIVER_H
#define MTC_DRIVER_H

#include "cuda_driver.h"

#define MTC_MAX_DEVICES 64

// The oldest driver the shim accepts: CUDA 11.2 (r460) introduced the
// stream-ordered allocator (cuMemAllocAsync and memory pools) it relies on.
#define MTC_MIN_DRIVER_VERSION 11020

// Status codes of the shim itself, above every CUresult value.
#define MTC_E_BAD_DEVICE 100001
#define MTC_E_BAD_ARGUMENT 100002
#define MTC_E_NO_DRIVER 100003
#define MTC_E_DRIVER_TOO_OLD 100004
#define MTC_E_MISSING_SYMBOL 100005
#define MTC_E_STOPPED 100006
#define MTC_E_WRONG_DEVICE 100007

#define MTC_HIDDEN __attribute__((visibility("hidden")))

// Resolved driver entry points; valid once mtc_driver_load() returned 0.
extern struct mtc_cuda_api mtc_cu MTC_HIDDEN;
// Optional entry points (NULL where the driver lacks them).
extern struct mtc_cuda_optional_api mtc_cu_optional MTC_HIDDEN;

// Loads and initialises the driver once per process. Returns 0, or why the
// driver cannot be used (MTC_E_NO_DRIVER, MTC_E_DRIVER_TOO_OLD,
// MTC_E_MISSING_SYMBOL, or the CUresult of cuInit). "No device" is not a
// failure: it returns 0 with a device count of 0.
MTC_HIDDEN int mtc_driver_load(void);

// What mtc_driver_load() found: its status, the driver's CUDA version (0
// when unknown), the number of devices, and a detail text (the dynamic
// loader's message, or the missing symbol's name).
MTC_HIDDEN int mtc_driver_status(int *driver_version, int *device_count, const char **detail);

// Makes the primary context of `device` current on the calling thread (CUDA
// contexts are per thread, and Workers call in on their own threads).
MTC_HIDDEN int mtc_use_device(int device);

// The primary context of `device` (after mtc_use_device succeeded for it).
MTC_HIDDEN CUcontext mtc_context(int device);

// Makes `device` current and writes the library's non-blocking stream for
// it, creating the stream and configuring the device's memory pool on first
// use.
MTC_HIDDEN int mtc_stream_for(int device, CUstream *out);

// Loads `image` (a fat binary) once per device and returns `name` from it.
// `slot` identifies the image and function (0..MTC_MAX_MODULES-1): one
// function is cached per slot.
#define MTC_MAX_MODULES 4
MTC_HIDDEN int mtc_function(int device, int slot, const void *image, const char *name,
                            CUfunction *out);

// A lock for rare one-time initialisation (no pthread dependency, so the
// library loads on any glibc the oldest supported Deno runs on).
MTC_HIDDEN void mtc_lock(void);
MTC_HIDDEN void mtc_unlock(void);

#endif
