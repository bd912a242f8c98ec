/**
 * Admission: a copy starts only when the memory it needs fits under the
 * pools' limits (src/memory/limits.ts). This file wires the isolate's
 * queue (admission_queue.ts) to the library's pools, limits and clock.
 *
 * Note [Copies that wait for memory]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * What a copy needs is estimated from its payload before anything is
 * allocated (memory_needs.ts). Block rounding can add to it; the estimate
 * decides when a copy may start, not how much it may take.
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
 *   to `POLL_MAX_MS` (admission_queue.ts);
 * - dropped results give their memory back only through finalizers, which
 *   run after a garbage collection; the poll asks for one rarely (after
 *   `NUDGE_FIRST_MS`, then at doubling intervals up to `NUDGE_MAX_MS`), never per poll: a full collection each
 *   millisecond cost 46–118 % of a core for as long as a copy waited.
 * A copy still waiting after `waitMs` fails: the memory is held by live
 * tensors, and waiting longer would be a deadlock. Both failures are
 * `MemoryLimitError`s.
 *
 * While it waits, a copy holds its inputs (Submission.holdInputs): user
 * code runs meanwhile, and an input disposed or an arena reset must stay
 * what the walk found. A copy never admitted gives those holds back, and
 * disposes its outputs, when its handle aborts it (transfer/submit.ts).
 *
 * @module
 */

import { reapFinished } from "../copies_in_flight.ts";
import { devicePool } from "../memory/device_memory.ts";
import { memoryLimits, memoryLimitsError, onLimitsChanged } from "../memory/limits.ts";
import { pinnedPool, pinnedView, pinnedViewsByCode } from "../memory/pinned_memory.ts";
import type { PackedStages } from "../packed_walk.ts";
import { onMemoryReleased } from "../memory/released.ts";
import { Storage } from "../memory/storage.ts";
import type { Route } from "../route.ts";
import { type AdmissionDeps, AdmissionQueue } from "./admission_queue.ts";

/** Allocation that V8 counts as external memory: enough of it starts a collection. */
const NUDGE_BYTES = 8 * 1024 * 1024;

function nudgeCollector(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  else new Uint8Array(NUDGE_BYTES);
}

/** The library's pools, limits, clock and timers. */
export const PRODUCTION_ADMISSION: AdmissionDeps = {
  pinned: () => pinnedPool,
  device: devicePool,
  limits: memoryLimits,
  now: () => performance.now(),
  setTimer: (callback, delayMs) => setTimeout(callback, delayMs),
  clearTimer: (timer) => clearTimeout(timer),
  reapFinished: () => reapFinished(true),
  nudgeCollector,
};

/** The isolate's queue. */
const copies = new AdmissionQueue(PRODUCTION_ADMISSION);
onMemoryReleased(() => copies.memoryReleased());
onLimitsChanged(() => copies.limitsChanged());

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
  return copies.admit(route);
}

/**
 * The pinned blocks a compiled walk packs into (see packed_walk.ts): taken
 * only where a copy could take them now, with no copy waiting for memory
 * ahead of it and room under the pinned limit; else the walk does not
 * pack, and the copy is admitted as any other.
 */
export const PACKED_STAGES: PackedStages = {
  acquire(bytes) {
    if (copies.waiting > 0 || memoryLimitsError() !== undefined) return undefined;
    if (!pinnedPool.makeRoom(pinnedPool.sizeClass(bytes))) return undefined;
    return pinnedPool.acquire(bytes);
  },
  release: (block) => pinnedPool.release(block),
  view: pinnedView,
  viewsByCode: pinnedViewsByCode,
  pinnedPending: () => Storage.pending(pinnedPool),
};
