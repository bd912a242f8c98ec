/**
 * `memoryStats`: what the library holds of pinned and device memory.
 *
 * @module
 */

import { hostParked } from "../../ffi/native.ts";
import { deviceCount, deviceName } from "../device.ts";
import type { BlockPoolStats } from "./block_pool_types.ts";
import { devicePool, devicePoolIndices } from "./device_memory.ts";
import { devicesWithProcessMemory } from "./process_cache.ts";
import { arenaMemory } from "./arena_memory.ts";
import { type MemoryLimits, memoryLimits } from "./limits.ts";
import { pinnedPool } from "./pinned_memory.ts";
import { stagerMemory } from "./stager_pool.ts";

/** One pool's figures, in bytes and counts. */
export interface PoolMemoryStats {
  /** Held from CUDA: in use plus cached. */
  reservedBytes: number;
  /** Held by this isolate's live tensors and copies in flight. */
  inUseBytes: number;
  /**
   * Idle, kept for reuse by any isolate of the process (`releaseCachedMemory()`
   * frees it).
   */
  cachedBytes: number;
  /**
   * Held from CUDA by every isolate of the process together (the main thread
   * and each Worker): in use anywhere, plus cached.
   */
  processBytes: number;
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
  /**
   * One device memory pool per device used so far (by this isolate, or
   * holding memory of any isolate), by device name (`"cuda:0"`).
   */
  devices: Record<string, PoolMemoryStats>;
  /** Pinned host memory outside the pools, and so outside their limits. */
  outsidePools: {
    /** Host arenas not freed yet (`hostArena`; pinned ones only). */
    arenas: number;
    /** Their bytes. */
    arenaBytes: number;
    /**
     * Background stagers of the process (each holds its slots while it lives;
     * idle ones go back with the pools' idle memory, and any isolate reuses them).
     */
    stagers: number;
    /** Their pinned slots' bytes. */
    stagingBytes: number;
    /**
     * Pinned blocks and arenas whose memory a user moved away with its
     * buffer (`transfer()`, `postMessage` with a transfer list) and that
     * were then given back: never reused, and freed once the moved buffer is
     * gone (process-wide).
     */
    movedAway: number;
    /** Their bytes. */
    movedAwayBytes: number;
  };
  /** The limits in force (see `setMemoryLimits`). */
  limits: MemoryLimits;
}

/**
 * One pool's figures as {@linkcode memoryStats} reports them, from the
 * pool's counters: what is cached is what is held and not in use.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { BlockPool } from "./block_pool.ts";
 * const pool = new BlockPool({ alloc: (bytes) => bytes, free() {} });
 * pool.release(pool.acquire(8192));
 * assert.equal(poolMemoryStats(pool.stats()).cachedBytes, 8192);
 * ```
 */
export function poolMemoryStats(stats: BlockPoolStats): PoolMemoryStats {
  return {
    reservedBytes: stats.reservedBytes,
    inUseBytes: stats.inUseBytes,
    cachedBytes: stats.reservedBytes - stats.inUseBytes,
    processBytes: stats.processBytes,
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
 * Counts are this isolate's (the main thread, or one Worker), except what is
 * idle, which every isolate shares, and `processBytes`, the whole process's.
 * Pinned memory outside the pools is counted apart (`outsidePools`): host
 * arenas, and the background stagers' slots (8 MiB per staging thread and
 * device; idle ones are freed by `releaseCachedMemory()` and the idle
 * release, like the pools' cached blocks).
 *
 * @returns a fresh snapshot
 *
 * @example Watching a loop for growth
 * ```ts
 * import assert from "node:assert/strict";
 * import { memoryStats } from "@mtc/core";
 * const { pinned, outsidePools } = memoryStats();
 * assert.equal(pinned.reservedBytes, pinned.inUseBytes + pinned.cachedBytes);
 * assert.ok(pinned.processBytes >= pinned.inUseBytes);
 * assert.ok(outsidePools.arenaBytes >= 0 && outsidePools.stagingBytes >= 0);
 * ```
 */
export function memoryStats(): MemoryStats {
  const devices: Record<string, PoolMemoryStats> = {};
  const indices = new Set([...devicePoolIndices(), ...devicesWithProcessMemory()]);
  for (const index of [...indices].sort((a, b) => a - b)) {
    devices[deviceName(index)] = poolMemoryStats(devicePool(index).stats());
  }
  const arenas = arenaMemory();
  const staging = stagerMemory();
  const moved = deviceCount() > 0 ? hostParked() : { count: 0, bytes: 0 };
  return {
    pinned: poolMemoryStats(pinnedPool.stats()),
    devices,
    outsidePools: {
      arenas: arenas.arenas,
      arenaBytes: arenas.bytes,
      stagers: staging.stagers,
      stagingBytes: staging.bytes,
      movedAway: moved.count,
      movedAwayBytes: moved.bytes,
    },
    limits: { ...memoryLimits() },
  };
}
