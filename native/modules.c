// Users' device code with only the driver: modules from PTX, cubin or fat
// binaries (the driver JIT-compiles PTX), their kernels, and launches.
//
// A launch is one call: its configuration and its arguments come in one
// buffer that the caller reuses, laid out as the kernel's parameters
// (CU_LAUNCH_PARAM_BUFFER_POINTER), so that nothing is allocated per launch.

#include <string.h>

#include "shim.h"

#define STREAM(a) ((CUstream)PTR(a))
#define EVENT(a) ((CUevent)PTR(a))

// Loads a module on `device` from `image` (PTX text ending in a NUL byte,
// a cubin or a fat binary); the JIT's error log goes to `log` (`log_bytes`
// bytes, NUL-terminated). Called as a nonblocking FFI call, on a Deno
// blocking-pool thread: the JIT may take milliseconds to seconds.
MTC_EXPORT int32_t mtc_module_load(int32_t device, const uint8_t *image, double *out, uint8_t *log,
                                   int32_t log_bytes) {
  if (image == NULL || out == NULL || log == NULL || log_bytes < 1) return MTC_E_BAD_ARGUMENT;
  int st = mtc_use_device(device);
  if (st) return st;
  log[0] = 0;
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, (void *)(uintptr_t)log_bytes};
  CUmodule module;
  st = mtc_cu.cuModuleLoadDataEx(&module, image, 2, options, values);
  log[log_bytes - 1] = 0;
  if (st) return st;
  *out = ADDR(module);
  return 0;
}

MTC_EXPORT int32_t mtc_module_unload(int32_t device, addr_t module) {
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu.cuModuleUnload((CUmodule)PTR(module));
}

// The kernel `name` (NUL-terminated) of `module`.
MTC_EXPORT int32_t mtc_module_function(int32_t device, addr_t module, const uint8_t *name,
                                       double *out) {
  if (name == NULL) return MTC_E_BAD_ARGUMENT;
  int st = mtc_use_device(device);
  if (st) return st;
  CUfunction f;
  st = mtc_cu.cuModuleGetFunction(&f, (CUmodule)PTR(module), (const char *)name);
  if (st) return st;
  *out = ADDR(f);
  return 0;
}

// The parameter layout of a kernel as its image declares it: out[0] the
// count, then (offset, size) per parameter, at most `max` parameters.
// CUDA_ERROR_NOT_SUPPORTED where the driver cannot tell (before CUDA 12.4).
// Where the driver cannot count them (cuFuncGetParamCount, newer drivers),
// the caller passes one more than the parameters it expects as `max`: the
// probe past the last parameter (which the driver refuses, and
// compute-sanitizer reports: tests/sanitize.sh) is what tells that the
// kernel takes no more.
MTC_EXPORT int32_t mtc_function_params(int32_t device, addr_t function, double *out, int32_t max) {
  if (mtc_cu_optional.cuFuncGetParamInfo == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  int st = mtc_use_device(device);
  if (st) return st;
  if (mtc_cu_optional.cuFuncGetParamCount) {
    size_t known = 0;
    st = mtc_cu_optional.cuFuncGetParamCount((CUfunction)PTR(function), &known);
    if (st) return st;
    if ((size_t)max > known) max = (int32_t)known;
  }
  int32_t count = 0;
  for (; count < max; count++) {
    size_t offset = 0, size = 0;
    st = mtc_cu_optional.cuFuncGetParamInfo((CUfunction)PTR(function), (size_t)count, &offset,
                                            &size);
    // Past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE.
    if (st == CUDA_ERROR_INVALID_VALUE) break;
    if (st) return st;
    out[1 + 2 * count] = (double)offset;
    out[2 + 2 * count] = (double)size;
  }
  out[0] = count;
  return 0;
}

#define CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

// What a launch of `function` may ask for: out[0] threads per block, out[1]
// bytes of dynamic shared memory per block (out[2]: its static shared
// bytes). CUDA_ERROR_NOT_SUPPORTED where the driver cannot tell.
MTC_EXPORT int32_t mtc_function_limits(int32_t device, addr_t function, double *out) {
  if (out == NULL) return MTC_E_BAD_ARGUMENT;
  if (mtc_cu_optional.cuFuncGetAttribute == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  int st = mtc_use_device(device);
  if (st) return st;
  CUfunction f = (CUfunction)PTR(function);
  static const int attributes[3] = {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES};
  for (int i = 0; i < 3; i++) {
    int value = 0;
    st = mtc_cu_optional.cuFuncGetAttribute(&value, attributes[i], f);
    if (st) return st;
    out[i] = value;
  }
  return 0;
}

// The launch buffer: eight uint32 (grid x, y, z, block x, y, z, dynamic
// shared bytes, argument bytes), then the arguments at offset 32, laid out
// as the kernel's parameters.
#define MTC_LAUNCH_HEADER_BYTES 32

// Launches `function` on `stream` of `device` with the configuration and
// arguments in `config`, then records `event` (of `device`; 0: none).
MTC_EXPORT int32_t mtc_launch(int32_t device, addr_t function, addr_t stream, addr_t event,
                              const uint8_t *config) {
  if (config == NULL) return MTC_E_BAD_ARGUMENT;
  int st = mtc_use_device(device);
  if (st) return st;
  uint32_t h[8];
  memcpy(h, config, sizeof h);
  size_t arg_bytes = h[7];
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)(config + MTC_LAUNCH_HEADER_BYTES),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &arg_bytes, CU_LAUNCH_PARAM_END};
  MTC_FAULT(MTC_FAULT_KERNEL);
  st = mtc_cu.cuLaunchKernel((CUfunction)PTR(function), h[0], h[1], h[2], h[3], h[4], h[5], h[6],
                             STREAM(stream), NULL, arg_bytes > 0 ? extra : NULL);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_KERNELS);
  if (event) return mtc_cu.cuEventRecord(EVENT(event), STREAM(stream));
  return 0;
}
