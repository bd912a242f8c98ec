// @mtc/core native shim: a small, boring C ABI over the CUDA driver API.
//
// Every export is `mtc_*`, returns an int32 status (0 = OK, otherwise a
// CUresult or an MTC_E_* code) and writes results through out-pointers.
// The driver (libcuda.so.1) is opened with dlopen on first use (driver.c),
// so this library loads on any Linux machine and says why CUDA cannot be
// used where it cannot. Device code is compiled ahead of time into a fat
// binary embedded in copies.c and loaded with cuModuleLoadData. The exports
// are exactly the symbols of ffi/symbols.ts; test aids live in testaid.c.
//
// This file holds what identifies the library and explains its statuses:
// the ABI version, the source hash, error names and texts, and whether CUDA
// can be used. The exports by concept: memory.c (host and device memory),
// events.c, copies.c (copies and the gather), streams.c, modules.c (users'
// device code), stager.c and copy_pieces.c (staging on threads),
// process_cache*.c (the process-wide caches).

#include <string.h>

#include "shim.h"

// Bumped whenever an export changes; the loader refuses any other version.
// (The test build overrides it to check that refusal.)
#ifndef MTC_ABI_VERSION
#define MTC_ABI_VERSION 15
#endif

#ifndef MTC_SOURCE_HASH
#error "build with -DMTC_SOURCE_HASH=<sha256 of the shim's sources> (native/build.sh)"
#endif
// Kept as one string in the binary, so that CI can read it from a binary it
// cannot load (another architecture) with grep.
static const char source_marker[] __attribute__((used)) = "MTC_SOURCE_HASH=" MTC_SOURCE_HASH;


MTC_EXPORT int32_t mtc_abi_version(void) { return MTC_ABI_VERSION; }

// The SHA-256 of the sources this binary was built from (native/build.sh).
MTC_EXPORT const char *mtc_source_hash(void) { return source_marker + strlen("MTC_SOURCE_HASH="); }

MTC_EXPORT const char *mtc_error_name(int32_t code) {
  switch (code) {
    case MTC_E_BAD_DEVICE: return "MTC_ERROR_BAD_DEVICE";
    case MTC_E_BAD_ARGUMENT: return "MTC_ERROR_BAD_ARGUMENT";
    case MTC_E_NO_DRIVER: return "MTC_ERROR_NO_DRIVER";
    case MTC_E_DRIVER_TOO_OLD: return "MTC_ERROR_DRIVER_TOO_OLD";
    case MTC_E_MISSING_SYMBOL: return "MTC_ERROR_MISSING_SYMBOL";
    case MTC_E_STOPPED: return "MTC_ERROR_STOPPED";
    case MTC_E_WRONG_DEVICE: return "MTC_ERROR_WRONG_DEVICE";
  }
  const char *name = NULL;
  if (mtc_cu.cuGetErrorName && mtc_cu.cuGetErrorName(code, &name) == CUDA_SUCCESS && name) {
    return name;
  }
  return "CUDA_ERROR_UNRECOGNIZED";
}

MTC_EXPORT const char *mtc_error_string(int32_t code) {
  switch (code) {
    case MTC_E_BAD_DEVICE: return "device index out of range";
    case MTC_E_BAD_ARGUMENT: return "invalid argument";
    case MTC_E_NO_DRIVER: return "the NVIDIA driver library libcuda.so.1 cannot be loaded";
    case MTC_E_DRIVER_TOO_OLD: return "the NVIDIA driver is too old";
    case MTC_E_MISSING_SYMBOL: return "the NVIDIA driver lacks an entry point the shim needs";
    case MTC_E_STOPPED: return "background staging was stopped: the program is ending";
    case MTC_E_WRONG_DEVICE: return "the stream belongs to another device or context";
  }
  const char *text = NULL;
  if (mtc_cu.cuGetErrorString && mtc_cu.cuGetErrorString(code, &text) == CUDA_SUCCESS && text) {
    return text;
  }
  return "unrecognized CUDA error code";
}

// Loads the driver if needed and says whether CUDA can be used: returns 0 or
// why not (MTC_E_NO_DRIVER, MTC_E_DRIVER_TOO_OLD, MTC_E_MISSING_SYMBOL, or a
// CUresult of cuInit). out: [driver's CUDA version (0: unknown), device
// count, the minimum driver version]. No device is status 0, count 0.
MTC_EXPORT int32_t mtc_cuda_status(int32_t *out) {
  int version = 0, count = 0;
  const char *detail;
  int st = mtc_driver_status(&version, &count, &detail);
  out[0] = version;
  out[1] = count;
  out[2] = MTC_MIN_DRIVER_VERSION;
  return st;
}

// The dynamic loader's message when libcuda.so.1 could not be opened, or
// the name of a missing driver entry point; "" otherwise.
MTC_EXPORT const char *mtc_cuda_status_detail(void) {
  int version, count;
  const char *detail;
  mtc_driver_status(&version, &count, &detail);
  return detail;
}
