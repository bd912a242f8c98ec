/**
 * `memoryStats`: what the library holds of pinned and device memory.
 *
 * @module
 */

import { deviceName } from "../device.ts";
import type { BlockPoolStats } from "./block_pool.ts";
import { devicePool, devicePoolIndices } from "./device_memory.ts";
import { stagingMemory } from "../staging/background.ts";
import { arenaMemory } from "./host_arena.ts";
import { type MemoryLimits, memoryLimits } from "./limits.ts";
import { pinnedPool } from "./pinned_memory.ts";

/** One pool's figures, in bytes and counts. */
export interface PoolMemoryStats {
  /** Held from CUDA: in use plus cached. */
  reservedBytes: number;
  /** Held by live tensors and copies in flight. */
  inUseBytes: number;
  /** Idle, kept for reuse (`releaseCachedMemory()` frees it). */
  cachedBytes: number;
  /** The most ever held at once. */
  peakReservedBytes: number;
  /** Allocations from CUDA so far (0 per copy in a steady loop). */
  allocations: number;
  /** Requests served from the cache. */
  reuses: number;
  /** The pool's limit on held bytes (see `setMemoryLimits`). */
  limitBytes: number;
}

/** What {@linkcode memoryStats} reports. */
export interface MemoryStats {
  /** The pinned host memory pool (staging, packed chunks, GPU→CPU outputs). */
  pinned: PoolMemoryStats;
  /** One device memory pool per device used so far, by device name (`"cuda:0"`). */
  devices: Record<string, PoolMemoryStats>;
  /** Pinned host memory outside the pools, and so outside their limits. */
  outsidePools: {
    /** Host arenas not freed yet (`hostArena`; pinned ones only). */
    arenas: number;
    /** Their bytes. */
    arenaBytes: number;
    /** Background stagers (each holds its slots while it lives; idle ones go back with the pools' idle memory). */
    stagers: number;
    /** Their pinned slots' bytes. */
    stagingBytes: number;
  };
  /** The limits in force (see `setMemoryLimits`). */
  limits: MemoryLimits;
}

function figures(stats: BlockPoolStats): PoolMemoryStats {
  return {
    reservedBytes: stats.reservedBytes,
    inUseBytes: stats.inUseBytes,
    cachedBytes: stats.reservedBytes - stats.inUseBytes,
    peakReservedBytes: stats.peakReservedBytes,
    allocations: stats.misses,
    reuses: stats.hits,
    limitBytes: stats.limitBytes,
  };
}

/**
 * The pinned and device memory the library holds now: in use, cached for
 * reuse, the peak, how many allocations it took, and the limits. A steady
 * training loop shows `allocations` standing still and `reservedBytes` flat.
 * Pinned memory outside the pools is counted apart (`outsidePools`): host
 * arenas, and the background stagers' slots (8 MiB per staging thread and
 * device; idle ones are freed by `releaseCachedMemory()` and the idle
 * release, like the pools' cached blocks).
 *
 * @returns a fresh snapshot
 *
 * @example Watching a loop for growth
 * ```ts
 * import { memoryStats } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const { pinned, outsidePools } = memoryStats();
 * assert.equal(pinned.reservedBytes, pinned.inUseBytes + pinned.cachedBytes);
 * assert.ok(outsidePools.arenaBytes >= 0 && outsidePools.stagingBytes >= 0);
 * ```
 */
export function memoryStats(): MemoryStats {
  const devices: Record<string, PoolMemoryStats> = {};
  for (const index of devicePoolIndices()) {
    devices[deviceName(index)] = figures(devicePool(index).stats());
  }
  const arenas = arenaMemory();
  const staging = stagingMemory();
  return {
    pinned: figures(pinnedPool.stats()),
    devices,
    outsidePools: {
      arenas: arenas.arenas,
      arenaBytes: arenas.bytes,
      stagers: staging.stagers,
      stagingBytes: staging.bytes,
    },
    limits: { ...memoryLimits() },
  };
}
