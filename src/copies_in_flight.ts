/**
 * The copies in flight: every handle not settled yet, oldest first, and the
 * other GPU work that is settled along with them.
 *
 * Its own file because three rooms settle copies without holding a handle:
 * `startCopy` (at every copy, so that a dropped handle still returns its
 * staging memory), the admission under the memory limits (before it waits
 * for memory) and the release at exit. The set also keeps an unsettled
 * handle reachable, so its memory is never collected while the GPU may still
 * use it.
 *
 * @module
 */

/** A copy in flight as the set sees it: it settles itself when asked. */
export interface InFlightCopy {
  /** Whether the copy has completed or failed (settling it if it has). Never blocks. */
  ready(): boolean;
}

/**
 * Other GPU work that holds memory until the CPU sees it done (kernel
 * launches, `gpu/work.ts`): settled along with the copies.
 */
export const otherWork: ((everyOne: boolean) => void)[] = [];

/**
 * The unsettled handles, in the order their copies started: a handle adds
 * itself when made and removes itself when it settles.
 */
export const inFlight: Set<InFlightCopy> = new Set();

/**
 * Settles the in-flight handles whose copies have finished, oldest first,
 * stopping at the first one still running: copies on one stream finish in
 * order, so this costs one query per settled copy plus one, not one per
 * copy in flight (with 1000 in flight, asking all of them at every
 * `startCopy` took seconds). A later copy that finished earlier on another
 * device is settled by its own `ready()`/`get()`, or by a later call.
 * With `everyOne`, asks every handle (waiting for memory, process exit).
 */
export function reapFinished(everyOne = false): void {
  for (let i = 0; i < otherWork.length; i++) otherWork[i](everyOne);
  for (const handle of inFlight) {
    if (!handle.ready() && !everyOne) return;
  }
}
