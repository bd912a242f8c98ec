// Loads the CUDA driver (libcuda.so.1) with dlopen on first use, so that the
// shim itself loads on any Linux machine: with no driver, no GPU, or a
// driver too old, it reports why instead of failing to load.

#define _GNU_SOURCE
#include "driver.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

// glibc 2.34 moved dlopen into libc under a new symbol version; binding the
// original versions (still exported by every glibc since) keeps the prebuilt
// shim loadable on older distributions. libdl.so.2 is linked explicitly and
// still exists (as a stub) on new glibc.
#if defined(__x86_64__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver dlopen,dlopen@GLIBC_2.17");
__asm__(".symver dlsym,dlsym@GLIBC_2.17");
__asm__(".symver dlerror,dlerror@GLIBC_2.17");
#endif

struct mtc_cuda_api mtc_cu;
struct mtc_cuda_optional_api mtc_cu_optional;

static volatile int g_lock_word;
static volatile int g_loaded;  // 1 once g_status and friends are final
static int g_status = CUDA_ERROR_NOT_INITIALIZED;
static int g_driver_version;
static int g_device_count;
static char g_detail[256];

static CUcontext g_contexts[MTC_MAX_DEVICES];
static CUstream g_streams[MTC_MAX_DEVICES];
static CUfunction g_functions[MTC_MAX_DEVICES][MTC_MAX_MODULES];
static int g_function_status[MTC_MAX_DEVICES][MTC_MAX_MODULES];

void mtc_lock(void) {
  while (__atomic_exchange_n(&g_lock_word, 1, __ATOMIC_ACQUIRE)) sched_yield();
}

void mtc_unlock(void) { __atomic_store_n(&g_lock_word, 0, __ATOMIC_RELEASE); }

static void set_detail(const char *text) {
  snprintf(g_detail, sizeof g_detail, "%s", text ? text : "");
}

static int resolve_all(void *lib) {
#define MTC_RESOLVE(name, symbol, params)                     \
  mtc_cu.name = (CUresult(*) params)dlsym(lib, symbol);       \
  if (mtc_cu.name == NULL) {                                  \
    set_detail(symbol);                                       \
    return MTC_E_MISSING_SYMBOL;                              \
  }
  MTC_CUDA_FUNCTIONS(MTC_RESOLVE)
#undef MTC_RESOLVE
  return 0;
}

// The optional entry points of the GPU-work API (see cuda_driver.h).
static void resolve_optional(void *lib) {
  struct mtc_cuda_optional_api *o = &mtc_cu_optional;
  o->cuFuncGetParamCount = (mtc_cuFuncGetParamCount_t)dlsym(lib, "cuFuncGetParamCount");
  o->cuFuncGetAttribute = (mtc_cuFuncGetAttribute_t)dlsym(lib, "cuFuncGetAttribute");
  o->cuCtxSynchronize = (mtc_cuCtxSynchronize_t)dlsym(lib, "cuCtxSynchronize");
}

static int load_once(void) {
  // RTLD_LOCAL: the driver's symbols must not leak into the process's
  // global namespace, where another library might expect its own.
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    set_detail(dlerror());
    return MTC_E_NO_DRIVER;
  }
  mtc_cu.cuDriverGetVersion = (mtc_cuDriverGetVersion_t)dlsym(lib, "cuDriverGetVersion");
  mtc_cu.cuGetErrorName = (mtc_cuGetErrorName_t)dlsym(lib, "cuGetErrorName");
  mtc_cu.cuGetErrorString = (mtc_cuGetErrorString_t)dlsym(lib, "cuGetErrorString");
  if (!mtc_cu.cuDriverGetVersion || !mtc_cu.cuGetErrorName || !mtc_cu.cuGetErrorString) {
    // A libcuda.so.1 older than CUDA 6.0, or not NVIDIA's.
    set_detail("cuDriverGetVersion");
    mtc_cu.cuGetErrorName = NULL;
    mtc_cu.cuGetErrorString = NULL;
    return MTC_E_DRIVER_TOO_OLD;
  }
  int version = 0;
  CUresult err = mtc_cu.cuDriverGetVersion(&version);
  if (err != CUDA_SUCCESS) return err;
  g_driver_version = version;
  if (version < MTC_MIN_DRIVER_VERSION) return MTC_E_DRIVER_TOO_OLD;
  int st = resolve_all(lib);
  if (st) return st;
  mtc_cu_optional.cuFuncGetParamInfo =
      (mtc_cuFuncGetParamInfo_t)dlsym(lib, "cuFuncGetParamInfo");
  resolve_optional(lib);
  err = mtc_cu.cuInit(0);
  if (err == CUDA_ERROR_NO_DEVICE) return 0;  // a driver and no GPU: zero devices
  if (err != CUDA_SUCCESS) return err;
  int count = 0;
  err = mtc_cu.cuDeviceGetCount(&count);
  if (err == CUDA_ERROR_NO_DEVICE) return 0;
  if (err != CUDA_SUCCESS) return err;
  g_device_count = count > MTC_MAX_DEVICES ? MTC_MAX_DEVICES : count;
  return 0;
}

int mtc_driver_load(void) {
  if (__atomic_load_n(&g_loaded, __ATOMIC_ACQUIRE)) return g_status;
  mtc_lock();
  if (!g_loaded) {
    g_status = load_once();
    __atomic_store_n(&g_loaded, 1, __ATOMIC_RELEASE);
  }
  mtc_unlock();
  return g_status;
}

int mtc_driver_status(int *driver_version, int *device_count, const char **detail) {
  int st = mtc_driver_load();
  *driver_version = g_driver_version;
  *device_count = st == 0 ? g_device_count : 0;
  *detail = g_detail;
  return st;
}

int mtc_use_device(int device) {
  int st = mtc_driver_load();
  if (st) return st;
  if (device < 0 || device >= g_device_count) return MTC_E_BAD_DEVICE;
  CUcontext ctx = __atomic_load_n(&g_contexts[device], __ATOMIC_ACQUIRE);
  if (ctx == NULL) {
    mtc_lock();
    ctx = g_contexts[device];
    CUresult err = CUDA_SUCCESS;
    if (ctx == NULL) {
      // The primary context is the one the CUDA runtime (and so PyTorch,
      // CuPy) uses too: memory and events are shared with them. It is
      // retained for the life of the process.
      CUdevice dev;
      err = mtc_cu.cuDeviceGet(&dev, device);
      if (err == CUDA_SUCCESS) err = mtc_cu.cuDevicePrimaryCtxRetain(&ctx, dev);
      if (err == CUDA_SUCCESS) __atomic_store_n(&g_contexts[device], ctx, __ATOMIC_RELEASE);
    }
    mtc_unlock();
    if (err != CUDA_SUCCESS) return err;
  }
  CUcontext current = NULL;
  CUresult err = mtc_cu.cuCtxGetCurrent(&current);
  if (err != CUDA_SUCCESS) return err;
  if (current != ctx) return mtc_cu.cuCtxSetCurrent(ctx);
  return 0;
}

CUcontext mtc_context(int device) { return g_contexts[device]; }

int mtc_stream_for(int device, CUstream *out) {
  int st = mtc_use_device(device);
  if (st) return st;
  CUstream s = __atomic_load_n(&g_streams[device], __ATOMIC_ACQUIRE);
  if (s == NULL) {
    mtc_lock();
    CUresult err = CUDA_SUCCESS;
    s = g_streams[device];
    if (s == NULL) {
      // Keep freed device memory cached in the stream-ordered pool instead
      // of returning it to the OS at every synchronisation point.
      CUdevice dev;
      CUmemoryPool pool;
      uint64_t threshold = UINT64_MAX;
      err = mtc_cu.cuDeviceGet(&dev, device);
      if (err == CUDA_SUCCESS) err = mtc_cu.cuDeviceGetDefaultMemPool(&pool, dev);
      if (err == CUDA_SUCCESS) {
        err = mtc_cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
      }
      if (err == CUDA_SUCCESS) err = mtc_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
      if (err == CUDA_SUCCESS) __atomic_store_n(&g_streams[device], s, __ATOMIC_RELEASE);
    }
    mtc_unlock();
    if (err != CUDA_SUCCESS) return err;
  }
  *out = s;
  return 0;
}

int mtc_function(int device, int slot, const void *image, const char *name, CUfunction *out) {
  int st = mtc_use_device(device);
  if (st) return st;
  if (slot < 0 || slot >= MTC_MAX_MODULES) return MTC_E_BAD_ARGUMENT;
  CUfunction f = __atomic_load_n(&g_functions[device][slot], __ATOMIC_ACQUIRE);
  if (f != NULL) {
    *out = f;
    return 0;
  }
  mtc_lock();
  st = g_function_status[device][slot];
  f = g_functions[device][slot];
  if (f == NULL && st == 0) {
    // The driver picks the machine code for this GPU from the fat binary,
    // or JIT-compiles its PTX for GPUs newer than the build.
    CUmodule module;
    st = mtc_cu.cuModuleLoadData(&module, image);
    if (st == CUDA_SUCCESS) st = mtc_cu.cuModuleGetFunction(&f, module, name);
    if (st == CUDA_SUCCESS) {
      __atomic_store_n(&g_functions[device][slot], f, __ATOMIC_RELEASE);
    } else {
      // Remembered: loading is slow, and the answer will not change.
      g_function_status[device][slot] = st;
    }
  }
  mtc_unlock();
  if (st) return st;
  *out = f;
  return 0;
}
