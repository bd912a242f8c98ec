/**
 * How `get()` waits for a copy that was not complete when asked: it polls,
 * then waits off the main thread.
 *
 * After a microtask, `get()` polls the copy's events until the copy's
 * expected end (its bytes at {@linkcode ASSUMED_BYTES_PER_MICROSECOND} from
 * the first poll; only while no other copy is in flight) plus
 * {@linkcode SPIN_MICROSECONDS}, for at most {@linkcode MAX_SPIN_MICROSECONDS},
 * then waits on a Deno blocking-pool thread (a nonblocking FFI
 * `cuEventSynchronize`) so the event loop keeps running. A poll answers in
 * well under a microsecond; the off-thread wait's wake-up took 60–200 µs on
 * the GPU hosts (a 4 MB copy whose DMA takes 83 µs resolved after 276 µs
 * when only 30 µs were polled), so a copy about to end is polled for.
 *
 * Apart from the handle (`copy_handle.ts`) because it is a policy of its
 * own, tuned by measurement; the handle's private state reaches it through
 * the {@linkcode CopyWaitHooks} its class passes, so the wait adds no object
 * per copy.
 *
 * @module
 */

import { inFlight, type InFlightCopy } from "./copies_in_flight.ts";
import type { CopyJob, EventOps } from "./copy_job.ts";

/** How long `get()` polls past a copy's expected end before waiting off-thread. */
const SPIN_MICROSECONDS = 30;

/** The longest `get()` polls (blocking the event loop) before waiting off-thread. */
const MAX_SPIN_MICROSECONDS = 1000;

/** The transfer rate `get()` assumes to expect a copy's end: lower than any link's. */
const ASSUMED_BYTES_PER_MICROSECOND = 20_000;

/**
 * What the wait reads and does to the copy it waits for: the handle's
 * private state, through one object its class makes once.
 */
export interface CopyWaitHooks {
  /** Whether `copy` has neither completed nor failed (no event query). */
  pending(copy: InFlightCopy): boolean;
  /** Fails `copy` with the CUDA status an off-thread wait answered. */
  fail(copy: InFlightCopy, status: number): void;
  /** The settled copy's result; throws its failure instead when it failed. */
  outcome(copy: InFlightCopy): unknown;
}

/**
 * Waits until `copy` (whose work is `job`, its events asked through
 * `events`) settles: polls `copy.ready()` while the copy is expected to end
 * soon, then waits for each event off the main thread.
 *
 * @returns a Promise of the copy's result, rejected with its failure
 */
export async function waitForCopy<R>(
  copy: InFlightCopy,
  job: CopyJob<R>,
  events: EventOps,
  hooks: CopyWaitHooks,
): Promise<R> {
  // Polling starts after a microtask at least, so that get() returns at
  // once and the caller's code goes on (`Promise.all` over copies to two
  // devices starts the second before the first is polled for).
  await (job.submitted ? job.submitted.catch(() => {}) : undefined);
  if (hooks.pending(copy)) {
    // Polling blocks the event loop, which other copies in flight need
    // (their staging goes on in promise continuations): past the expected
    // end only while this is the one copy in flight. (Two copies to two
    // devices started together measured 1.64x one device's rate instead
    // of 1.96x while each get() polled for its whole expected time.)
    // The expected end counts from the first poll rather than from the
    // start (a clock read per copy saved, ~120 ns): a copy not done by
    // then polls for at most its expected time more, within the cap.
    const now = performance.now();
    const expected = job.stats.bytes / ASSUMED_BYTES_PER_MICROSECOND / 1000;
    const until = inFlight.size > 1 ? now : now + expected;
    const deadline = Math.min(
      until + SPIN_MICROSECONDS / 1000,
      now + MAX_SPIN_MICROSECONDS / 1000,
    );
    while (!copy.ready() && performance.now() < deadline) { /* poll */ }
  }
  while (hooks.pending(copy)) {
    const list = job.events;
    for (let i = 0; i < list.length; i++) {
      const status = await events.wait(list[i].device, list[i].event);
      if (status !== 0 && hooks.pending(copy)) hooks.fail(copy, status);
    }
    copy.ready();
  }
  return hooks.outcome(copy) as R;
}
