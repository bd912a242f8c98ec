/**
 * Idle memory goes back to CUDA: the idle blocks a pool keeps for itself
 * are freed once the pool has not been used for `idleReleaseMs` (between
 * one and two periods: each tick frees the fronts of the pools whose use
 * count stood still since the previous one, so that using a pool costs no
 * clock read), and whatever has been idle that long in the process-wide
 * caches (blocks of every kind, background stagers: the shim ages them) is
 * freed too. One timer at most, started by a release and unref'd, so it
 * never keeps a process alive; a training loop that copies every few
 * milliseconds frees nothing. Installed by src/lifecycle.ts
 * ({@linkcode installIdleRelease}).
 *
 * @module
 */

import type { BlockPool } from "./block_pool.ts";
import { devicePool, devicePoolIndices, devicePools } from "./device_memory.ts";
import { memoryLimits, onLimitsChanged } from "./limits.ts";
import { pinnedPool } from "./pinned_memory.ts";
import { processCacheIdle, trimProcessCaches } from "./process_cache.ts";
import { onMemoryReleased } from "./released.ts";

let timer: ReturnType<typeof setTimeout> | undefined;
// Each pool's use count at the last tick.
const usesAtTick = new WeakMap<BlockPool, number>();

function pools(): BlockPool[] {
  return [pinnedPool, ...devicePools()];
}

/** The longest delay `setTimeout` keeps: a longer one fires after 1 ms (and warns). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The timer delay for an idle release due in `delayMs`: at most
 * {@linkcode MAX_TIMER_MS} (an `idleReleaseMs` past it releases after
 * about 24.8 idle days, never after 1 ms).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(timerDelay(2 ** 40), MAX_TIMER_MS);
 * assert.equal(timerDelay(-5), 0);
 * ```
 */
export function timerDelay(delayMs: number): number {
  return Math.min(Math.max(0, delayMs), MAX_TIMER_MS);
}

function arm(delayMs: number): void {
  timer = setTimeout(releaseIdle, timerDelay(delayMs));
  Deno.unrefTimer(timer);
}

function schedule(): void {
  if (timer !== undefined) return;
  const idleMs = memoryLimits().idleReleaseMs;
  if (!Number.isFinite(idleMs)) return;
  if (pools().some((pool) => pool.frontBytes > 0) || processCacheIdle()) arm(idleMs);
}

function releaseIdle(): void {
  timer = undefined;
  const idleMs = memoryLimits().idleReleaseMs;
  if (!Number.isFinite(idleMs)) return;
  let next = Infinity;
  for (const pool of pools()) {
    if (pool.frontBytes === 0) continue;
    if (usesAtTick.get(pool) === pool.uses) {
      pool.trimFront();
    } else {
      usesAtTick.set(pool, pool.uses);
      next = idleMs;
    }
  }
  next = Math.min(next, trimProcessCaches(idleMs).nextMs);
  if (next < Infinity) arm(next);
}

let installed = false;

/**
 * Installs the idle release (once per isolate; later calls do nothing): a
 * release of pooled memory arms the timer, and a change of the limits
 * re-arms it and frees idle memory above a lowered limit. Called from
 * src/lifecycle.ts, the one place the library's lifecycle hooks are
 * installed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * installIdleRelease();
 * assert.equal(installIdleRelease(), undefined); // a second call adds nothing
 * ```
 */
export function installIdleRelease(): void {
  if (installed) return;
  installed = true;
  onMemoryReleased(schedule);
  onLimitsChanged(limitsChanged);
}

function limitsChanged(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  // A lower limit frees idle memory above it now.
  const { pinnedBytes, deviceBytes } = memoryLimits();
  if (pinnedPool.reservedBytes > pinnedBytes) pinnedPool.trim();
  for (const device of devicePoolIndices()) {
    const pool = devicePool(device);
    if (pool.reservedBytes > deviceBytes) pool.trim();
  }
  schedule();
}
