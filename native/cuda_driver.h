// The slice of the CUDA driver API (cuda.h) that the shim uses, declared
// here so that the shim builds with a plain C compiler and no CUDA toolkit.
// Values are those of cuda.h since CUDA 11.2; the symbol names are the ones
// cuda.h maps the API to (the `_v2` names where cuda.h uses them, never the
// per-thread-stream `_ptsz` variants: every call names its stream).

#ifndef MTC_CUDA_DRIVER_H
#define MTC_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef int CUjit_option;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_NOT_SUPPORTED 801

#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4

// X(name in this table, exported symbol, return, parameters)
#define MTC_CUDA_FUNCTIONS(X)                                                                    \
  X(cuInit, "cuInit", (unsigned int flags))                                                      \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                                          \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                                \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice device))    \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext * ctx))                                       \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                                         \
  X(cuStreamCreate, "cuStreamCreate", (CUstream * stream, unsigned int flags))                   \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                    \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))                               \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned int flags)) \
  X(cuStreamQuery, "cuStreamQuery", (CUstream stream))                                           \
  X(cuStreamGetCtx, "cuStreamGetCtx", (CUstream stream, CUcontext * ctx))                        \
  X(cuEventCreate, "cuEventCreate", (CUevent * event, unsigned int flags))                       \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent event))                                        \
  X(cuEventRecord, "cuEventRecord", (CUevent event, CUstream stream))                            \
  X(cuEventQuery, "cuEventQuery", (CUevent event))                                               \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent event))                                   \
  X(cuMemHostAlloc, "cuMemHostAlloc", (void **p, size_t bytes, unsigned int flags))              \
  X(cuMemFreeHost, "cuMemFreeHost", (void *p))                                                   \
  X(cuMemAllocAsync, "cuMemAllocAsync", (CUdeviceptr * p, size_t bytes, CUstream stream))        \
  X(cuMemFreeAsync, "cuMemFreeAsync", (CUdeviceptr p, CUstream stream))                          \
  X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", (CUmemoryPool * pool, CUdevice dev)) \
  X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", (CUmemoryPool pool, int attr, void *value))  \
  X(cuMemPoolTrimTo, "cuMemPoolTrimTo", (CUmemoryPool pool, size_t min_bytes_to_keep))           \
  X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t * free_bytes, size_t * total_bytes))                \
  X(cuMemcpyAsync, "cuMemcpyAsync", (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))    \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                   \
    (CUdeviceptr dst, const void *src, size_t n, CUstream s))                                    \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *dst, CUdeviceptr src, size_t n, CUstream s)) \
  X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync",                                                      \
    (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,           \
     CUstream s))                                                                                \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void *image))                \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                                    \
    (CUmodule * module, const void *image, unsigned n, CUjit_option *options, void **values))    \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule module))                                         \
  X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction * f, CUmodule m, const char *name))  \
  X(cuLaunchKernel, "cuLaunchKernel",                                                            \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
     unsigned shared, CUstream s, void **params, void **extra))

// The entry points that every driver has, resolved first: they say whether
// the rest can be used at all.
typedef CUresult (*mtc_cuDriverGetVersion_t)(int *version);
typedef CUresult (*mtc_cuGetErrorName_t)(CUresult error, const char **name);
typedef CUresult (*mtc_cuGetErrorString_t)(CUresult error, const char **text);

#define MTC_DECLARE_POINTER(name, symbol, params) CUresult(*name) params;
struct mtc_cuda_api {
  mtc_cuDriverGetVersion_t cuDriverGetVersion;
  mtc_cuGetErrorName_t cuGetErrorName;
  mtc_cuGetErrorString_t cuGetErrorString;
  MTC_CUDA_FUNCTIONS(MTC_DECLARE_POINTER)
};
#undef MTC_DECLARE_POINTER

// Entry points that only newer drivers have, or that only the GPU-work API
// uses; NULL where the driver lacks them (resolved in driver.c, never
// required: the copies work without them).
typedef CUresult (*mtc_cuFuncGetParamInfo_t)(CUfunction f, size_t index, size_t *offset,
                                             size_t *size);  // CUDA 12.4
typedef CUresult (*mtc_cuFuncGetParamCount_t)(CUfunction f, size_t *count);  // newer than 13.0
typedef CUresult (*mtc_cuFuncGetAttribute_t)(int *value, int attribute, CUfunction f);
typedef CUresult (*mtc_cuCtxSynchronize_t)(void);
struct mtc_cuda_optional_api {
  mtc_cuFuncGetParamInfo_t cuFuncGetParamInfo;
  mtc_cuFuncGetParamCount_t cuFuncGetParamCount;
  mtc_cuFuncGetAttribute_t cuFuncGetAttribute;
  mtc_cuCtxSynchronize_t cuCtxSynchronize;  // every driver has it; stand-in drivers may not
};

#endif
