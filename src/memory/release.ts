/**
 * `releaseCachedMemory`: give the pools' idle memory back to CUDA.
 *
 * @module
 */

import { devicePoolIndices, trimDevicePool } from "./device_memory.ts";
import { pinnedPool } from "./pinned_memory.ts";
import { releaseIdleStagers } from "../staging/background.ts";
// Idle memory also goes back on its own, after the idle-release time.
import "./idle_release.ts";

/**
 * Frees every idle block of the pinned and device memory pools, and the
 * pinned slots of idle background stagers, and gives the memory back to the
 * OS (other processes can use it). Memory held by
 * live tensors or in-flight copies stays. The pools keep idle blocks so
 * that steady-state copies allocate nothing; call this when a phase that
 * copied a lot is over. Any TypedArray still viewing a freed pinned block
 * (from `toTypedArray()` of a disposed tensor) becomes empty rather than
 * pointing at freed memory.
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
  return freed + releaseIdleStagers();
}
