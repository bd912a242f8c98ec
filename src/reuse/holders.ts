/**
 * Who holds a pooled storage besides its tensors: kernel launches in
 * flight (each holds the storages of its tensor arguments until it
 * completes: gpu/work.ts, Note [Holds of GPU work]) and copies in flight
 * that read it. A copy into an earlier result (the `into` option) asks
 * this to tell holds it may order itself after (GPU work) from holds it
 * must refuse (a tensor sharing the memory).
 *
 * Launches note their holds here (one WeakMap update per storage argument,
 * against a launch's microseconds); copies note the storages they read
 * (one update per run of inputs sharing a storage). Settled works are
 * dropped as lists grow, so a storage launched on forever keeps a list as
 * long as its works in flight, not its history.
 *
 * @module
 */

import type { GpuWork } from "../gpu/work.ts";
import type { Storage } from "../memory/storage.ts";

const works = new WeakMap<Storage, GpuWork[]>();
const readers = new WeakMap<object, number>();

/** Notes that `work` holds each of `holds` (one hold per entry) until it settles. */
export function noteWorkHolds(work: GpuWork, holds: readonly Storage[]): void {
  for (let i = 0; i < holds.length; i++) {
    const storage = holds[i];
    let list = works.get(storage);
    if (list === undefined) {
      works.set(storage, list = []);
    } else if (list.length >= 8 && (list.length & (list.length - 1)) === 0) {
      // At each power of two: amortised, one query per noted hold at most.
      pruneSettled(list);
    }
    list.push(work);
  }
}

/** Drops the works that settled (they released their holds). */
function pruneSettled(list: GpuWork[]): void {
  let kept = 0;
  for (let i = 0; i < list.length; i++) if (!list[i].ready()) list[kept++] = list[i];
  list.length = kept;
}

/**
 * The works still holding `storage`, one entry per hold (a work passed two
 * tensors of it holds it twice). Settles those that completed first.
 */
export function worksHolding(storage: Storage): readonly GpuWork[] {
  const list = works.get(storage);
  if (list === undefined) return NONE;
  pruneSettled(list);
  if (list.length === 0) works.delete(storage);
  return list;
}

const NONE: readonly GpuWork[] = Object.freeze([]);

/** Notes that a copy holds each of `storages` (one hold each) while it reads them. */
export function readingStarted(storages: readonly object[]): void {
  for (let i = 0; i < storages.length; i++) {
    const storage = storages[i];
    readers.set(storage, (readers.get(storage) ?? 0) + 1);
  }
}

/** Ends {@linkcode readingStarted} for the same storages. */
export function readingEnded(storages: readonly object[]): void {
  for (let i = 0; i < storages.length; i++) {
    const storage = storages[i];
    const count = (readers.get(storage) ?? 1) - 1;
    if (count > 0) readers.set(storage, count);
    else readers.delete(storage);
  }
}

/** How many holds on `storage` copies in flight that read it have. */
export function copiesReading(storage: Storage): number {
  return readers.get(storage) ?? 0;
}
