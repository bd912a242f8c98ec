/**
 * One pool of device memory per CUDA device.
 *
 * Blocks come from `cuMemAllocAsync` on the library's stream for that device
 * and every later use of a block is queued on the same stream (peer copies
 * are fenced with events), so a released block may be reused at once: the
 * stream orders the new writes after the old reads. Freed blocks stay in
 * CUDA's stream-ordered pool until {@linkcode trimDevicePool} gives them
 * back to the OS.
 *
 * @module
 */

import { deviceAlloc, deviceFree, deviceReleaseUnused } from "../../ffi/native.ts";
import { BlockPool } from "./block_pool.ts";
import { memoryLimits } from "./limits.ts";
import { memoryReleased } from "./released.ts";

const pools: BlockPool[] = [];

/** The device memory pool of `cuda:device`. */
export function devicePool(device: number): BlockPool {
  return pools[device] ??= new BlockPool({
    alloc: (bytes) => deviceAlloc(device, bytes),
    free: (block) => deviceFree(device, block.address),
  }, {
    minBlockBytes: 512,
    maxCachedBytes: 2 * 1024 * 1024 * 1024,
    limitBytes: () => memoryLimits().deviceBytes,
    onRelease: memoryReleased,
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
 * Frees the idle blocks of `pool` (device `device`) and gives the memory
 * back to the OS, so that other processes can use it (waits for the
 * device's library stream). Returns the bytes freed.
 */
export function trimDevicePool(device: number, pool: BlockPool = devicePool(device)): number {
  const freed = pool.trim();
  if (freed > 0) deviceReleaseUnused(device);
  return freed;
}
