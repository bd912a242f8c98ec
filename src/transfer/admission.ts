/**
 * Admission: a copy starts only when the memory it needs fits under the
 * pools' limits (src/memory/limits.ts).
 *
 * What a copy needs is estimated from its payload before anything is
 * allocated: the target device's pool holds the outputs (CPU→CUDA and
 * CUDA→CUDA), the pinned pool the staging of small pageable inputs and the
 * outputs of CUDA→CPU. Block rounding can add to it; the estimate decides
 * when a copy may start, not how much it may take.
 *
 * A copy whose need is larger than a limit can never fit and fails at once,
 * also one already waiting when a limit is lowered below its need. One that
 * would fit once memory comes back waits in a first-come queue (later
 * copies queue behind it, so a large copy is not starved by small ones).
 * Waiting costs next to nothing:
 * - every release of pooled memory in this isolate (a disposed result, a
 *   copy that settled) wakes the queue at once, on a macrotask (a release
 *   can happen in the middle of another copy's bookkeeping);
 * - memory that comes back without a release this isolate sees (copies in
 *   flight that nobody polls) is found by a poll that backs off from 1 ms
 *   to {@linkcode POLL_MAX_MS};
 * - dropped results give their memory back only through finalizers, which
 *   run after a garbage collection; the poll asks for one rarely (after
 *   {@linkcode NUDGE_FIRST_MS}, then at doubling intervals up to
 *   {@linkcode NUDGE_MAX_MS}), never per poll: a full collection each
 *   millisecond cost 46–118 % of a core for as long as a copy waited.
 * A copy still waiting after `waitMs` fails: the memory is held by live
 * tensors, and waiting longer would be a deadlock. Both failures are
 * {@linkcode MemoryLimitError}s.
 *
 * @module
 */

import { reapFinished } from "../copy_handle.ts";
import { CPU, deviceName } from "../device.ts";
import type { BlockPool } from "../memory/block_pool.ts";
import { devicePool } from "../memory/device_memory.ts";
import { MemoryLimitError } from "../memory/limit_error.ts";
import { memoryLimits, memoryLimitsError, onLimitsChanged } from "../memory/limits.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { onMemoryReleased } from "../memory/released.ts";
import { Tensor } from "../tensor.ts";
import type { Route } from "../route.ts";
import { BACKGROUND_MIN_BYTES } from "../staging/background.ts";

/** The longest pause between two polls of a waiting copy, in ms. */
export const POLL_MAX_MS = 64;
/** How long a copy waits before the first garbage collection is asked for, in ms. */
export const NUDGE_FIRST_MS = 4;
/** The longest pause between two collections asked for while copies wait, in ms. */
export const NUDGE_MAX_MS = 1024;

/** What a copy needs of one pool. */
interface Need {
  pool: BlockPool;
  bytes: number;
  /** `pinned` or the device name, for errors. */
  memory: string;
  /** The environment variable that sets the limit, for errors. */
  variable: string;
}

/** Pinned staging the CPU→CUDA leaves need (small pageable ones only; arena leaves none). */
function pinnedStagingBytes(route: Route): number {
  const { usePinnedStaging, useBackgroundThread } = route.options;
  if (!usePinnedStaging) return 0;
  const h2d = route.h2d.view();
  let bytes = 0;
  for (let k = 0; k < h2d.length; k++) {
    const leaf = route.leaves[h2d[k]];
    if (leaf instanceof Tensor && leaf.pinned) continue;
    if (useBackgroundThread && leaf.byteLength >= BACKGROUND_MIN_BYTES) continue;
    bytes += leaf.byteLength;
  }
  return bytes;
}

function needsOf(route: Route): Need[] {
  const pinned = { pool: pinnedPool, memory: "pinned", variable: "MTC_PINNED_LIMIT" };
  if (route.target === CPU) return [{ ...pinned, bytes: route.movedBytes }];
  return [
    {
      pool: devicePool(route.target),
      bytes: route.movedBytes,
      memory: deviceName(route.target),
      variable: "MTC_DEVICE_LIMIT",
    },
    { ...pinned, bytes: pinnedStagingBytes(route) },
  ];
}

/** Whether `route`'s copy fits now; the fast path is two comparisons. */
function fits(route: Route): boolean {
  const bytes = route.movedBytes;
  if (bytes === 0) return true;
  const { pinnedBytes, deviceBytes } = memoryLimits();
  if (
    pinnedPool.reservedBytes + bytes <= pinnedBytes &&
    (route.target === CPU || devicePool(route.target).reservedBytes + bytes <= deviceBytes)
  ) {
    return true;
  }
  return needsOf(route).every((need) => need.bytes === 0 || need.pool.makeRoom(need.bytes));
}

function limitError(need: Need, waitedMs?: number): MemoryLimitError {
  return new MemoryLimitError({
    memory: need.memory,
    neededBytes: need.bytes,
    limitBytes: need.pool.limitBytes,
    inUseBytes: need.pool.inUseBytes,
    waitedMs,
    variable: need.variable,
  });
}

function neverFits(route: Route): MemoryLimitError | undefined {
  for (const need of needsOf(route)) {
    if (need.bytes > need.pool.limitBytes) return limitError(need);
  }
  return undefined;
}

function timedOut(route: Route, waitMs: number): MemoryLimitError {
  const needs = needsOf(route);
  return limitError(needs.find((need) => !need.pool.makeRoom(need.bytes)) ?? needs[0], waitMs);
}

interface Waiter {
  route: Route;
  deadline: number;
  waitMs: number;
  resolve(): void;
  reject(error: Error): void;
}

const queue: Waiter[] = [];
let timer: ReturnType<typeof setTimeout> | undefined;
let timerDue = Infinity;
// The poll's back-off, and the garbage collections asked for, since the
// queue last moved.
let pollMs = 1;
let lastNudge = 0;
let nudgeMs = NUDGE_FIRST_MS;

/** Allocation that V8 counts as external memory: enough of it starts a collection. */
const NUDGE_BYTES = 8 * 1024 * 1024;

function nudgeCollector(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  else new Uint8Array(NUDGE_BYTES);
}

function restartBackOff(): void {
  pollMs = 1;
  lastNudge = performance.now();
  nudgeMs = NUDGE_FIRST_MS;
}

/** Runs `pump` in `delayMs` (or sooner, if it is already due sooner). */
function pumpIn(delayMs: number): void {
  const due = performance.now() + delayMs;
  if (timer !== undefined) {
    if (timerDue <= due) return;
    clearTimeout(timer);
  }
  timerDue = due;
  timer = setTimeout(pump, Math.max(0, delayMs));
}

function pump(): void {
  timer = undefined;
  timerDue = Infinity;
  if (queue.length === 0) return;
  reapFinished(true);
  // One at a time: the admitted copy allocates when its submission runs
  // (a microtask later), so the next one is judged on the next turn.
  const admitted = fits(queue[0].route);
  if (admitted) {
    queue.shift()!.resolve();
    restartBackOff();
  }
  const now = performance.now();
  let deadline = Infinity;
  for (let i = queue.length - 1; i >= 0; i--) {
    const waiter = queue[i];
    if (now >= waiter.deadline) {
      queue.splice(i, 1);
      waiter.reject(timedOut(waiter.route, waiter.waitMs));
    } else {
      deadline = Math.min(deadline, waiter.deadline);
    }
  }
  if (queue.length === 0) return;
  if (admitted) return pumpIn(0);
  if (now - lastNudge >= nudgeMs) {
    nudgeCollector();
    lastNudge = now;
    nudgeMs = Math.min(2 * nudgeMs, NUDGE_MAX_MS);
  }
  pumpIn(Math.min(pollMs, deadline - now));
  pollMs = Math.min(2 * pollMs, POLL_MAX_MS);
}

// Memory came back: the head of the queue may fit now.
onMemoryReleased(() => {
  if (queue.length > 0) pumpIn(0);
});

onLimitsChanged(() => {
  // A waiting copy that the new limits can never fit fails now, not after waitMs.
  for (let i = queue.length - 1; i >= 0; i--) {
    const waiter = queue[i];
    const never = neverFits(waiter.route);
    if (never) {
      queue.splice(i, 1);
      waiter.reject(never);
    }
  }
  if (queue.length > 0) pumpIn(0);
  else stopPolling();
});

function stopPolling(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  timerDue = Infinity;
}

/**
 * `undefined` when `route`'s copy may start now; otherwise a Promise that
 * resolves when it may, or rejects when it never will (or waited too long).
 *
 * @throws {TypeError} the error of a malformed `MTC_*` limit variable that
 * `setMemoryLimits` has not overridden
 */
export function admission(route: Route): Promise<void> | undefined {
  if (route.movedBytes > 0) {
    const environment = memoryLimitsError();
    if (environment) throw environment;
  }
  if (queue.length === 0 && fits(route)) return undefined;
  const never = neverFits(route);
  if (never) return Promise.reject(never);
  const waitMs = memoryLimits().waitMs;
  return new Promise<void>((resolve, reject) => {
    if (queue.length === 0) restartBackOff();
    queue.push({ route, deadline: performance.now() + waitMs, waitMs, resolve, reject });
    pumpIn(0);
  });
}
