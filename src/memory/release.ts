/**
 * `releaseCachedMemory`: give the pools' idle memory back to CUDA.
 *
 * @module
 */

import { devicePoolIndices, trimDevicePool } from "./device_memory.ts";
import { releaseIdleEvents } from "./event_pool.ts";
import { pinnedPool } from "./pinned_memory.ts";
import { requestFlush, trimProcessCaches } from "./process_cache.ts";

/**
 * Frees the idle pinned and device memory the pools cache, and the pinned
 * slots of idle background stagers, and gives the memory back to the OS
 * (other processes can use it). Memory held by live tensors or in-flight
 * copies stays. The pools keep idle blocks so that steady-state copies
 * allocate nothing; call this when a phase that copied a lot is over.
 *
 * Idle memory is the process's, not one isolate's: a Worker's idle blocks
 * serve the main thread's next copy, and this call, from any isolate, frees
 * what every isolate gave back, ended Workers' included. Each live isolate
 * also keeps a few idle pinned blocks for itself (with its views of them,
 * which only it can detach): those are freed at that isolate's next use of
 * its pools or its idle release, and this isolate's at once. Any TypedArray
 * still viewing a freed pinned block (from `toTypedArray()` of a disposed
 * tensor) becomes empty rather than pointing at freed memory.
 *
 * @returns the number of bytes freed
 *
 * @example After a large evaluation pass
 * ```ts
 * import { memoryStats, releaseCachedMemory } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const freed = releaseCachedMemory();
 * assert.ok(Number.isInteger(freed) && freed >= 0);
 * assert.equal(memoryStats().pinned.cachedBytes, 0);
 * ```
 */
export function releaseCachedMemory(): number {
  let freed = pinnedPool.trim();
  for (const device of devicePoolIndices()) freed += trimDevicePool(device);
  // Devices this isolate never used, and the background stagers.
  freed += trimProcessCaches(0).freed;
  releaseIdleEvents();
  requestFlush();
  return freed;
}
