/**
 * The shim's process-wide caches, as the pools see them: idle pinned and
 * device blocks, events and background stagers that every isolate of the
 * process (the main thread, each Worker) takes from and gives back to, so
 * that memory one isolate cached is the whole process's, and an isolate that
 * ends strands nothing (native/process_cache.c has the design note).
 *
 * Where no CUDA device is usable nothing is ever cached: the figures read 0
 * and nothing calls the shim.
 *
 * @module
 */

import {
  ALL_KINDS,
  blockAdopt,
  blockGive,
  blockTake,
  cacheCounters,
  cacheTrim,
  requestCacheFlush,
  stagersTrim,
  type Trimmed,
} from "../../ffi/process_cache.ts";
import { hostParked } from "../../ffi/native.ts";
import { deviceCount } from "../device.ts";
import type { Block, SharedBlockCache } from "./block_pool_types.ts";

// The counters' layout (native/process_cache.c).
const FLUSH_EPOCH = 0;
const STAGERS = 1;
const STAGER_BYTES = 2;
const IDLE_STAGER_BYTES = 3;
const cachedIndex = (kind: number) => 4 + 2 * (kind + 1);
const heldIndex = (kind: number) => 5 + 2 * (kind + 1);

/** The most devices the shim tracks (native/driver.h). */
const MAX_DEVICES = 64;
const UNVIEWED_BYTES = 4 + 2 * (MAX_DEVICES + 1);

let mapped: Float64Array | null | undefined;

/** The shim's counters, read without a call; undefined where no device is usable. */
function counters(): Float64Array | undefined {
  if (mapped === undefined) mapped = deviceCount() > 0 ? cacheCounters() : null;
  return mapped ?? undefined;
}

/**
 * Bytes of pinned memory parked behind buffers users moved whose buffers
 * have died since, waiting to be freed (read without a call).
 */
export function unviewedPinnedBytes(): number {
  return counters()?.[UNVIEWED_BYTES] ?? 0;
}

/**
 * Frees pinned memory that was parked behind a buffer a user moved
 * (native/host_views.c) once that buffer has died: one read of a counter
 * where there is none.
 */
export function freeUnviewedPinned(): void {
  if (unviewedPinnedBytes() > 0) hostParked();
}

/** The process-wide cache of one kind: -1 pinned host memory, N `cuda:N`'s memory. */
export function sharedCache(kind: number): SharedBlockCache {
  const cached = cachedIndex(kind);
  const held = heldIndex(kind);
  return {
    get flushEpoch(): number {
      return counters()?.[FLUSH_EPOCH] ?? 0;
    },
    get cachedBytes(): number {
      return counters()?.[cached] ?? 0;
    },
    get processBytes(): number {
      return counters()?.[held] ?? 0;
    },
    take: (size: number): Block | undefined => blockTake(kind, size),
    adopt: (address: number, size: number): Block => blockAdopt(kind, address, size),
    give: (block: Block, maxCachedBytes: number): void => blockGive(block.id!, maxCachedBytes),
    trim: (olderThanMs: number): Trimmed =>
      counters() ? cacheTrim(kind, olderThanMs) : { freed: 0, nextMs: Infinity },
  };
}

/**
 * Frees what has been idle in the process-wide caches for `olderThanMs` or
 * more, of every kind, and the idle background stagers: what was freed, and
 * when the next idle item will be that old.
 */
export function trimProcessCaches(olderThanMs: number): Trimmed {
  if (!counters()) return { freed: 0, nextMs: Infinity };
  freeUnviewedPinned();
  const blocks = cacheTrim(ALL_KINDS, olderThanMs);
  const stagers = stagersTrim(olderThanMs);
  return {
    freed: blocks.freed + stagers.freed,
    nextMs: Math.min(blocks.nextMs, stagers.nextMs),
  };
}

/** Whether anything idle is cached process-wide (blocks of any kind, or stagers). */
export function processCacheIdle(): boolean {
  const values = counters();
  if (!values) return false;
  if (values[IDLE_STAGER_BYTES] > 0) return true;
  for (let kind = -1; kind < MAX_DEVICES; kind++) {
    if (values[cachedIndex(kind)] > 0) return true;
  }
  return false;
}

/** Asks every other isolate to free the idle blocks its pools keep for themselves. */
export function requestFlush(): void {
  if (counters()) requestCacheFlush();
}

/** Background stagers alive in the process, their bytes, and the idle ones' bytes. */
export function processStagers(): { stagers: number; bytes: number; idleBytes: number } {
  const values = counters();
  if (!values) return { stagers: 0, bytes: 0, idleBytes: 0 };
  return {
    stagers: values[STAGERS],
    bytes: values[STAGER_BYTES],
    idleBytes: values[IDLE_STAGER_BYTES],
  };
}

/** Bytes of `kind` (-1 pinned, N device N) held by every isolate together. */
export function processBytes(kind: number): number {
  return counters()?.[heldIndex(kind)] ?? 0;
}

/** The devices whose memory some isolate of the process holds or caches now. */
export function devicesWithProcessMemory(): number[] {
  const values = counters();
  const devices: number[] = [];
  if (!values) return devices;
  for (let device = 0; device < MAX_DEVICES; device++) {
    if (values[heldIndex(device)] > 0) devices.push(device);
  }
  return devices;
}
