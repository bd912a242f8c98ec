// Copies on the library's copy stream: between CUDA-visible addresses, from
// a JS buffer, between devices, and the gather of many device tensors into
// one packed buffer (one kernel, or one copy per tensor where the device
// code cannot load). Its own file because this is how a transfer's bytes
// move on the GPU once staged; the gather kernel's fat binary is embedded
// here, its one user.

#include "gather_entry.h"
#include "generated/gather_fatbin.h"
#include "shim.h"

#define GATHER_MODULE 0

// One async copy between CUDA-visible addresses (pinned host or device) on
// the stream of `device`, then (if `event` is not 0) an event record after
// it: the whole submission of a packed chunk in one call. With unified
// addressing the driver infers the direction from the addresses.
MTC_EXPORT int32_t mtc_copy_async(int32_t device, addr_t dst, addr_t src, double bytes, addr_t event) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (bytes > 0) {
    MTC_FAULT(MTC_FAULT_COPY);
    st = mtc_cu.cuMemcpyAsync(DPTR(dst), DPTR(src), (size_t)bytes, s);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  if (event) return mtc_cu.cuEventRecord((CUevent)PTR(event), s);
  return 0;
}

// Host-to-device copy straight from a JS buffer (pageable memory). For
// pageable sources the driver snapshots the bytes before returning, so the
// JS buffer may be reused as soon as this call returns.
MTC_EXPORT int32_t mtc_copy_from_buffer(int32_t device, addr_t dst, const uint8_t *src, double offset,
                                        double bytes) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (bytes <= 0) return 0;
  if (src == NULL) return MTC_E_BAD_ARGUMENT;
  MTC_FAULT(MTC_FAULT_COPY);
  st = mtc_cu.cuMemcpyHtoDAsync(DPTR(dst), src + (size_t)offset, (size_t)bytes, s);
  if (st) return st;
  MTC_COUNT(MTC_COUNT_COPIES);
  return 0;
}

// Peer copy from `src` on `src_device` to `dst` on `dst_device`, ordered
// after all work already queued on both library streams, and later work on
// both streams ordered after it. Two scratch events fence it: `before_copy`
// (of dst_device), recorded on the destination's stream and waited for by
// the source's, so that the copy follows the destination's queued work; and
// `after_copy` (of src_device), recorded after the copy on the source's
// stream and waited for by the destination's.
MTC_EXPORT int32_t mtc_copy_peer(int32_t dst_device, addr_t dst, int32_t src_device, addr_t src,
                                 double bytes, addr_t before_copy, addr_t after_copy) {
  CUstream sd, ss;
  int st = mtc_stream_for(dst_device, &sd);
  if (st) return st;
  st = mtc_cu.cuEventRecord((CUevent)PTR(before_copy), sd);
  if (st) return st;
  st = mtc_stream_for(src_device, &ss);
  if (st) return st;
  st = mtc_cu.cuStreamWaitEvent(ss, (CUevent)PTR(before_copy), 0);
  if (st) return st;
  if (bytes > 0) {
    MTC_FAULT(MTC_FAULT_PEER_COPY);
    st = mtc_cu.cuMemcpyPeerAsync(DPTR(dst), mtc_context(dst_device), DPTR(src),
                                  mtc_context(src_device), (size_t)bytes, ss);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  st = mtc_cu.cuEventRecord((CUevent)PTR(after_copy), ss);
  if (st) return st;
  return mtc_cu.cuStreamWaitEvent(sd, (CUevent)PTR(after_copy), 0);
}

// The gather without device code: one device-to-device copy per entry. Used
// where the driver cannot load the fat binary (a driver older than the
// device code needs and no PTX JIT for it); correct, and slower.
static int gather_on_copy_engines(CUstream s, const struct mtc_gather_entry *table, int32_t count,
                                  addr_t dst) {
  for (int32_t i = 0; i < count; i++) {
    if (table[i].bytes <= 0) continue;
    int st = mtc_cu.cuMemcpyAsync(DPTR(dst) + (CUdeviceptr)table[i].dst_offset,
                                  DPTR(table[i].src), (size_t)table[i].bytes, s);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  return 0;
}

// Gathers `count` device tensors of `device` listed in `table` (pinned,
// mapped) into the packed device buffer `dst` (one kernel), then optionally
// copies `bytes` of it to `host_dst` (one transfer) and records `event`.
// This is how many small GPU tensors leave the device with one DMA.
MTC_EXPORT int32_t mtc_gather(int32_t device, addr_t table, int32_t count, addr_t dst, addr_t host_dst,
                              double bytes, addr_t event) {
  CUstream s;
  int st = mtc_stream_for(device, &s);
  if (st) return st;
  if (count < 0) return MTC_E_BAD_ARGUMENT;
  if (count > 0) {
    CUfunction kernel = NULL;
    if (MTC_KERNELS_DISABLED() ||
        mtc_function(device, GATHER_MODULE, mtc_gather_fatbin, "mtc_gather_kernel", &kernel) != 0) {
      st = gather_on_copy_engines(s, (const struct mtc_gather_entry *)PTR(table), count, dst);
    } else {
      void *entries = PTR(table);
      void *out = PTR(dst);
      void *args[] = {&entries, &out};
      MTC_FAULT(MTC_FAULT_KERNEL);
      st = mtc_cu.cuLaunchKernel(kernel, (unsigned)count, 1, 1, 256, 1, 1, 0, s, args, NULL);
      if (st == 0) MTC_COUNT(MTC_COUNT_KERNELS);
    }
    if (st) return st;
  }
  if (host_dst && bytes > 0) {
    MTC_FAULT(MTC_FAULT_COPY);
    st = mtc_cu.cuMemcpyAsync(DPTR(host_dst), DPTR(dst), (size_t)bytes, s);
    if (st) return st;
    MTC_COUNT(MTC_COUNT_COPIES);
  }
  if (event) return mtc_cu.cuEventRecord((CUevent)PTR(event), s);
  return 0;
}
