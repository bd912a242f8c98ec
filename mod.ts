/**
 * @mtc/core moves nested structures of many small tensors between CPU memory
 * and CUDA GPUs, fast: small tensors are packed into pinned chunks and sent
 * with one DMA per chunk, large ones are staged in parallel, and completion
 * surfaces as a Promise.
 *
 * @example Copy a batch's meta-data to the GPU
 * ```ts
 * import { deviceCount, disposeAll, startCopy } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const batch = [{ boxes: new Float32Array(8), active: new Uint8Array(2) }];
 * const device = deviceCount() > 0 ? "cuda:0" : "cpu";
 * const onDevice = await startCopy(batch, device).get();
 * assert.equal(onDevice[0].boxes.device, device);
 * assert.equal(onDevice[0].active.dtype, "uint8");
 * disposeAll(onDevice);
 * ```
 *
 * @module
 */

// The idle release and the exit release, installed once per isolate, here:
// every isolate that uses the library imports this module first
// (src/lifecycle.ts says why at import).
import "./src/lifecycle.ts";

export { startCopy } from "./src/start_copy.ts";
export { prefetch } from "./src/prefetch.ts";
export type { PrefetchOptions } from "./src/prefetch.ts";
export { BACKGROUND_MIN_BYTES } from "./src/staging/background.ts";
export type {
  CopyResult,
  HasMethods,
  HasNonPublicMembers,
  OpaqueObject,
  PassesThrough,
} from "./src/copy_result.ts";
export type { AsyncCopyHandle } from "./src/copy_handle.ts";
export type { CopyStats } from "./src/copy_job.ts";
export type { StartCopyOptions } from "./src/options.ts";
export { Tensor } from "./src/tensor.ts";
export type { DType, TypedArray } from "./src/dtype.ts";
export { disposeAll } from "./src/dispose.ts";
export { releaseCachedMemory } from "./src/memory/release.ts";
export { memoryStats } from "./src/memory/stats.ts";
export type { MemoryStats, PoolMemoryStats } from "./src/memory/stats.ts";
export { setMemoryLimits } from "./src/memory/limits.ts";
export { MemoryLimitError } from "./src/memory/limit_error.ts";
export type { MemoryLimitErrorOptions } from "./src/memory/limit_error.ts";
export { HostArena, hostArena } from "./src/memory/host_arena.ts";
export type { ArrayClass } from "./src/memory/arena_views.ts";
export type { MemoryLimits } from "./src/memory/limits.ts";
export { cudaStatus, deviceCount } from "./src/device.ts";
export type { CudaStatus, CudaStatusReason } from "./src/device.ts";
export { CudaError } from "./ffi/cuda_error.ts";
export { CudaStream } from "./src/gpu/stream.ts";
export { createStream, defaultStream } from "./src/gpu/device_streams.ts";
export { GpuWork } from "./src/gpu/work.ts";
export type { After } from "./src/gpu/after.ts";
export type { DisposeOptions } from "./src/gpu/ordered_release.ts";
export { CudaModule, loadModule } from "./src/gpu/module.ts";
export { ModuleLoadError } from "./src/gpu/module_load_error.ts";
export type { LoadModuleOptions } from "./src/gpu/module.ts";
export { Kernel } from "./src/gpu/kernel.ts";
export type { Dim3, LaunchConfig } from "./src/gpu/launch_config.ts";
export type { ParamType } from "./src/gpu/kernel_params.ts";
