/**
 * Idle memory goes back to CUDA: once a pool has not been used for
 * `idleReleaseMs`, its cached blocks are freed; so are the background
 * stagers' slots once no stager was used for that long. One timer at most, started
 * by a release and unref'd, so it never keeps a process alive; a training
 * loop that copies every few milliseconds never sees it fire.
 *
 * @module
 */

import type { BlockPool } from "./block_pool.ts";
import { devicePool, devicePoolIndices, devicePools, trimDevicePool } from "./device_memory.ts";
import { memoryLimits, onLimitsChanged } from "./limits.ts";
import { pinnedPool } from "./pinned_memory.ts";
import { onMemoryReleased } from "./released.ts";
import { idleStagers, releaseIdleStagers } from "../staging/background.ts";

let timer: ReturnType<typeof setTimeout> | undefined;

function pools(): BlockPool[] {
  return [pinnedPool, ...devicePools()];
}

function schedule(): void {
  if (timer !== undefined) return;
  const idleMs = memoryLimits().idleReleaseMs;
  if (!Number.isFinite(idleMs)) return;
  let due = Infinity;
  for (const pool of pools()) {
    if (pool.cachedBytes > 0) due = Math.min(due, pool.lastUse + idleMs);
  }
  const stagers = idleStagers();
  if (stagers.bytes > 0) due = Math.min(due, stagers.lastUse + idleMs);
  if (due === Infinity) return;
  timer = setTimeout(releaseIdle, Math.max(0, due - performance.now()));
  Deno.unrefTimer(timer);
}

function releaseIdle(): void {
  timer = undefined;
  const idleMs = memoryLimits().idleReleaseMs;
  const now = performance.now();
  const idle = (pool: BlockPool) => pool.cachedBytes > 0 && now - pool.lastUse >= idleMs;
  if (idle(pinnedPool)) pinnedPool.trim();
  for (const device of devicePoolIndices()) {
    if (idle(devicePool(device))) trimDevicePool(device);
  }
  const stagers = idleStagers();
  if (stagers.bytes > 0 && now - stagers.lastUse >= idleMs) releaseIdleStagers();
  schedule();
}

onMemoryReleased(schedule);
onLimitsChanged(() => {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  // A lower limit frees idle memory above it now.
  const { pinnedBytes, deviceBytes } = memoryLimits();
  if (pinnedPool.reservedBytes > pinnedBytes) pinnedPool.trim();
  for (const device of devicePoolIndices()) {
    if (devicePool(device).reservedBytes > deviceBytes) trimDevicePool(device);
  }
  schedule();
});
