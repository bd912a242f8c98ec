/**
 * The DMAs of a copy into an earlier result, and its handle: for each of
 * the result's storages (record.ts), one DMA to the range its tensors
 * cover, read from the host arena the data lies in where every leaf lies
 * there as the result does (a batch built in an arena at the offsets of
 * the last one), else from pinned staging the leaves are packed into at
 * their places in the block. A large single leaf is staged in the
 * background, as by the ordinary path; without pinned staging the leaves
 * are copied one by one from pageable memory. The copy holds the result's
 * storages, and marks the result busy, until it settles.
 *
 * @module
 */

import { copyAsync, copyFromBuffer } from "../../../ffi/native.ts";
import type { ArenaMemory } from "../../arena_index.ts";
import { type AsyncCopyHandle, createCopyHandle } from "../../copy_handle.ts";
import type { ResolvedOptions } from "../../options.ts";
import type { ResultEntry } from "../../reuse/results.ts";
import { BACKGROUND_MIN_BYTES } from "../../staging/background.ts";
import { isBufferDetached, viewByteLength } from "../../dtype.ts";
import { inputChanged, StageWriter } from "../../staging/pack.ts";
import { DIRECT, type IntoRecord } from "./record.ts";
import { Submission } from "../submission.ts";

/**
 * Queues the copy of the data `record` has read (once `ordered` settles,
 * where given) into `into` on device `target`, and makes its handle, whose
 * `get()` resolves with `into` itself. `unwritten` runs where the copy
 * fails before it queued anything (its handle then fails).
 */
export function submitInto(
  record: IntoRecord,
  entry: ResultEntry,
  into: object,
  target: number,
  options: ResolvedOptions,
  ordered: Promise<void> | undefined,
  unwritten: () => void,
): AsyncCopyHandle<unknown> {
  const stats = Submission.emptyStats(record.ledger);
  const submission = new Submission(record.ledger, stats);
  submission.involve(target);
  const { groups } = record;
  // (A storage released since the holds check, by a setter of the result,
  // refuses its hold: the ones taken go back, and the caller un-busies.)
  let retained = 0;
  try {
    for (; retained < groups.length; retained++) groups[retained].storage.retain();
  } catch (error) {
    for (let g = 0; g < retained; g++) groups[g].storage.release();
    throw error;
  }
  entry.busy = true;
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    entry.busy = false;
    for (let g = 0; g < groups.length; g++) groups[g].storage.release();
  };
  let job: ReturnType<Submission["job"]> | undefined;
  let submitted: Promise<void> | undefined;
  const events: { device: number; event: number }[] = [];
  try {
    // Packing reads the data now (the caller may change it once get() resolves).
    // A copy queued later packs into pinned staging whatever the options say:
    // a pageable copy would be queued now, before the waits it must follow.
    const transfers = prepare(record, submission, target, options, ordered === undefined);
    if (ordered === undefined) {
      queue(transfers, target);
      job = submission.job(() => {});
      submitted = job.submitted;
      events.push(...job.events);
    } else {
      submitted = ordered.then(async () => {
        queue(transfers, target);
        job = submission.job(() => {});
        events.push(...job.events);
        if (job.submitted) await job.submitted;
      }, (error) => {
        // Work named in `after` failed: nothing was queued, so the values
        // passed through go back as for a copy that failed in staging.
        unwritten();
        throw error;
      });
    }
  } catch (error) {
    // The handle fails at once and aborts: the ledger drains and gives back what it took.
    submitted = Promise.reject(error);
    // The ordering's own failure, if any, is this copy's no more: handled,
    // or it would end the process as an unhandled rejection.
    ordered?.catch(() => {});
    unwritten();
  }
  return createCopyHandle<unknown>({
    events,
    submitted,
    stats,
    outputs: into,
    complete: () => {
      try {
        job!.complete();
      } finally {
        settle();
      }
      return into;
    },
    abort: () => {
      if (job) job.abort();
      else submission.abort();
      settle();
    },
  });
}

/** The DMAs of one copy: destination, source and bytes, three numbers each. */
type Transfers = number[];

/**
 * Packs what must be packed and lists the DMAs (a direct one from an arena
 * for each group that lies in one as the result does); large single leaves
 * go to background staging where `now` (the copy is queued at once) and the
 * options allow.
 */
function prepare(
  record: IntoRecord,
  submission: Submission,
  target: number,
  options: ResolvedOptions,
  now: boolean,
): Transfers {
  const { groups, groupState, groupArena, groupDelta, views, offsets, byteLengths } = record;
  const transfers: Transfers = [];
  let heldArena: ArenaMemory | undefined;
  const { stats } = submission;
  const pinned = options.usePinnedStaging || !now;
  for (let g = 0; g < groups.length; g++) {
    const { storage, leaves, lo, hi } = groups[g];
    const span = hi - lo;
    if (span === 0) continue;
    if (leaves.length > 1) {
      stats.chunks++;
      stats.packedTensors += leaves.length;
    }
    const dst = storage.address + lo;
    if (groupState[g] === DIRECT) {
      // A setter of the result, run after the read (it writes the values
      // passed through), may have disposed the arena: its buffer is then
      // detached (whole: one view tells, an empty one too), and its memory
      // must not be read.
      const first = leaves[0];
      if (isBufferDetached(views[first]!)) throw inputChanged(byteLengths[first], 0);
      const arena = groupArena[g]!;
      if (arena !== heldArena) submission.holdArena(heldArena = arena);
      transfers.push(dst, arena.address + lo + groupDelta[g], span);
      stats.copies++;
      continue;
    }
    if (leaves.length === 1) {
      const n = leaves[0];
      const view = views[n]!;
      if (now && options.useBackgroundThread && pinned && span >= BACKGROUND_MIN_BYTES) {
        const buffer = view.buffer as ArrayBuffer & { growable?: boolean };
        if (buffer.resizable !== true && buffer.growable !== true) {
          submission.stageInBackground({ device: target, dst, src: view, bytes: span });
          stats.copies++;
          continue;
        }
      }
    }
    if (!pinned) {
      for (const n of leaves) {
        const view = views[n]!;
        // As the check read it: a getter later in the walk may have resized
        // it since (see `inputChanged`). Arena views cannot be resized, nor
        // can what goes to background staging.
        if (viewByteLength(view) !== byteLengths[n]) {
          throw inputChanged(byteLengths[n], viewByteLength(view));
        }
        if (byteLengths[n] === 0) continue;
        copyFromBuffer({ device: target, dst: storage.address + offsets[n], src: view });
        stats.copies++;
      }
      continue;
    }
    const stage = submission.takeStaging(span);
    const writer = new StageWriter(stage);
    for (let k = 0; k < leaves.length; k++) {
      const n = leaves[k];
      const view = views[n]!;
      if (viewByteLength(view) !== byteLengths[n]) {
        throw inputChanged(byteLengths[n], viewByteLength(view));
      }
      if (byteLengths[n] === 0) continue;
      writer.write(offsets[n] - lo, view, record.codes[n]);
    }
    transfers.push(dst, stage.address, span);
    stats.copies++;
  }
  return transfers;
}

/** Queues the DMAs on the copy stream of `target`. */
function queue(transfers: Transfers, target: number): void {
  for (let t = 0; t < transfers.length; t += 3) {
    copyAsync({
      device: target,
      dst: transfers[t],
      src: transfers[t + 1],
      bytes: transfers[t + 2],
    });
  }
}
