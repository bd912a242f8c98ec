// Gates: a stream waits on the GPU for a 32-bit word in pinned,
// device-mapped host memory to reach a value (cuStreamWaitValue32), so that
// it can be ordered after work that is not queued yet: a copy still staging
// large tensors, or waiting for memory. Once that work is queued, a library
// stream that waits for its events writes the value (cuStreamWriteValue32);
// if it fails before it is queued, the CPU writes it. Values only grow (the
// GPU compares cyclically), so a word is reused as soon as it was opened:
// a late wait for an older value still passes. See docs/ARCHITECTURE.md,
// "Streams, ordering and kernels".

#include "shim.h"

#define CU_STREAM_WAIT_VALUE_GEQ 0x0
#define CU_STREAM_WRITE_VALUE_DEFAULT 0x0
#define CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 92

// out[0] = 1 where streams of `device` can wait for and write gate words,
// 0 where the driver cannot (the _v2 entry points exist from CUDA 11.7 and
// work on every device; the first ones only where the kernel module
// enables them). Asked before the first gate closes, it also loads what the
// library would load later on `device` (the gather kernel): loading a
// module waits for the whole device, gated streams included, and the
// thread that would wait is the one that queues the copy a gate waits for.
MTC_EXPORT int32_t mtc_gate_support(int32_t device, double *out) {
  if (out == NULL) return MTC_E_BAD_ARGUMENT;
  int st = mtc_use_device(device);
  if (st) return st;
  mtc_load_gather(device);
  const struct mtc_cuda_optional_api *o = &mtc_cu_optional;
  out[0] = 0;
  if (o->cuStreamWaitValue32 == NULL || o->cuStreamWriteValue32 == NULL) return 0;
  if (!o->stream_values_v1) {
    out[0] = 1;
    return 0;
  }
  if (o->cuDeviceGetAttribute == NULL) return 0;
  CUdevice dev;
  st = mtc_cu.cuDeviceGet(&dev, device);
  if (st) return st;
  int enabled = 0;
  st = o->cuDeviceGetAttribute(&enabled, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, dev);
  if (st) return st;
  out[0] = enabled ? 1 : 0;
  return 0;
}

// Makes `stream` of `device` wait on the GPU until the word at `gate` (in
// device-mapped pinned memory: its host address is its device address)
// reaches `value`, compared cyclically. Returns at once.
MTC_EXPORT int32_t mtc_gate_wait(int32_t device, addr_t stream, addr_t gate, double value) {
  if (mtc_cu_optional.cuStreamWaitValue32 == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu_optional.cuStreamWaitValue32((CUstream)PTR(stream), DPTR(gate),
                                             (uint32_t)(uint64_t)value, CU_STREAM_WAIT_VALUE_GEQ);
}

// Writes `value` to the word at `gate` from `stream` of `device`, once the
// work queued on it before has completed (with a memory barrier: what that
// work wrote is visible first). Returns at once.
MTC_EXPORT int32_t mtc_gate_write(int32_t device, addr_t stream, addr_t gate, double value) {
  if (mtc_cu_optional.cuStreamWriteValue32 == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  int st = mtc_use_device(device);
  if (st) return st;
  return mtc_cu_optional.cuStreamWriteValue32((CUstream)PTR(stream), DPTR(gate),
                                              (uint32_t)(uint64_t)value,
                                              CU_STREAM_WRITE_VALUE_DEFAULT);
}

// Writes `value` to the word at `gate` from the CPU (a gate whose work
// failed before it was queued; `value` < 0: none), and returns the word.
MTC_EXPORT double mtc_gate_set(addr_t gate, double value) {
  uint32_t *word = (uint32_t *)PTR(gate);
  if (value >= 0) __atomic_store_n(word, (uint32_t)(uint64_t)value, __ATOMIC_SEQ_CST);
  return (double)__atomic_load_n(word, __ATOMIC_SEQ_CST);
}

// Gates closed now in the process, all isolates together: `delta` is added
// (+1 when one closes, -1 when it opens) and the count returned. While one
// is, a module load or a kernel's first lookup (lazy loading) would hold
// every stream of the device behind the gated one, the copy that opens the
// gate included (measured: H100, driver 580), so those wait or refuse.
MTC_EXPORT int32_t mtc_gate_count(int32_t delta) {
  static int32_t closed;
  return __atomic_add_fetch(&closed, delta, __ATOMIC_SEQ_CST);
}
