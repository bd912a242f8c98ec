// A test aid, never shipped: a stand-in for libcuda.so.1 that reports a
// given CUDA version and exports nothing else, so that the loader's answers
// to "driver too old" and "driver lacks an entry point" can be checked on
// machines without a GPU. Built by native/build.sh --test-aids as
// native/build/stub-driver-<version>/libcuda.so.1; tests put that directory
// on LD_LIBRARY_PATH of a child process. It claims nothing about GPUs.

#ifndef STUB_DRIVER_VERSION
#error "build with -DSTUB_DRIVER_VERSION=<cuDriverGetVersion value>"
#endif

#define EXPORT __attribute__((visibility("default")))

EXPORT int cuDriverGetVersion(int *version) {
  *version = STUB_DRIVER_VERSION;
  return 0;
}

EXPORT int cuGetErrorName(int error, const char **name) {
  (void)error;
  *name = "CUDA_ERROR_STUB";
  return 0;
}

EXPORT int cuGetErrorString(int error, const char **text) {
  (void)error;
  *text = "stub driver";
  return 0;
}
