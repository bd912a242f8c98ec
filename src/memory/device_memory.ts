/**
 * This isolate's pool of device memory per CUDA device.
 *
 * Blocks come from `cuMemAllocAsync` on the library stream for that device
 * and every later use of a block is queued on the same stream (peer copies
 * are fenced with events), so a released block may be reused at once: the
 * stream orders the new writes after the old reads. That stream is the
 * process's (one shim for every isolate), so the same holds for a block
 * another isolate gave back: idle device blocks beyond a small front
 * ({@linkcode DEVICE_FRONT_BYTES}, reused with no call) go to the
 * process-wide cache, where every isolate's pool finds them. Freed blocks
 * stay in CUDA's stream-ordered pool until {@linkcode trimDevicePool} (or
 * any trim of the cache) gives them back to the OS.
 *
 * @module
 */

import { deviceAlloc, deviceFree } from "../../ffi/native.ts";
import { blockFree } from "../../ffi/process_cache.ts";
import { BlockPool } from "./block_pool.ts";
import { memoryLimits } from "./limits.ts";
import { sharedCache } from "./process_cache.ts";
import { memoryReleased } from "./released.ts";

/**
 * Idle device bytes each pool keeps for its isolate (the rest goes to the
 * process-wide cache): a steady loop's blocks, reused without a call into
 * the shim (a copy from a host arena takes one block per run of
 * neighbours). The shim knows they are this isolate's, so they come back
 * when it ends; `releaseCachedMemory()` from any isolate frees them at the
 * pool's next use.
 */
export const DEVICE_FRONT_BYTES = 64 * 1024 * 1024;

const pools: BlockPool[] = [];

/** The device memory pool of `cuda:device`. */
export function devicePool(device: number): BlockPool {
  return pools[device] ??= new BlockPool({
    alloc: (bytes) => deviceAlloc(device, bytes),
    free: (block) =>
      block.id !== undefined ? blockFree(block.id) : deviceFree(device, block.address),
  }, {
    minBlockBytes: 512,
    maxCachedBytes: 2 * 1024 * 1024 * 1024,
    limitBytes: () => memoryLimits().deviceBytes,
    onRelease: memoryReleased,
    shared: sharedCache(device),
    frontBytes: DEVICE_FRONT_BYTES,
  });
}

/** Every device pool created so far. */
export function devicePools(): readonly BlockPool[] {
  return pools.filter((pool) => pool !== undefined);
}

/** The indices of the devices whose pool exists, in order. */
export function devicePoolIndices(): number[] {
  const indices: number[] = [];
  pools.forEach((pool, index) => pool !== undefined && indices.push(index));
  return indices;
}

/**
 * Frees the idle blocks of device `device` (this isolate's and the
 * process-wide cache's) and gives the memory back to the OS, so that other
 * processes can use it (waits for the device's library stream). Returns the
 * bytes freed.
 */
export function trimDevicePool(device: number): number {
  return devicePool(device).trim();
}
