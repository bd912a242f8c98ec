/**
 * One copy's ledger: everything it took and must give back.
 *
 * Note [Submission lifetime]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A copy takes memory of three kinds, and the ledger decides when each goes
 * back:
 *
 * - Pinned staging blocks (packed chunks on their way to a device, gather
 *   tables the kernel reads) are read by the GPU after the FFI call that
 *   queued the work has returned. They are released only once every event
 *   of the copy has completed ({@linkcode Submission.job}'s `complete`), or
 *   on failure after the streams drained ({@linkcode Submission.abort}): a
 *   block reused earlier could be overwritten while a DMA still reads it.
 * - Device blocks (outputs, gather scratch) may go back to their pool at
 *   once, even while work on them is queued: every use of a device block is
 *   queued on the library's one stream of that device, so the stream orders
 *   the next user's writes after this copy's reads. Peer copies keep that
 *   true with fence events on both devices' streams; the fences are held
 *   here until the copy completes.
 * - Input storages (tensors already in pooled memory) get one more hold
 *   while the copy reads them, so that disposing an input mid-copy cannot
 *   hand its block to someone else.
 * - Pinned outputs (a copy to the CPU writes its results into pinned
 *   blocks) get one more hold until the copy settles
 *   ({@linkcode Submission.holdOutput}): the CPU's next use of a block does
 *   not queue behind the DMA, so an output disposed mid-copy (through
 *   `outputs()` or a handle's `dispose()`) handed to the next copy's
 *   staging was overwritten by the late DMA, and that copy sent the copy
 *   back's bytes (tests/gpu/lifetime_test.ts). Host arenas the copy reads from are
 *   held the same way: `reset()` and `dispose()` throw until it settles.
 *
 * Completion is one event per device the copy touched, recorded after the
 * last work queued there (for the target, after background staging queued
 * its pieces). Whoever settles the copy (the handle, on success or
 * failure) calls exactly one of `complete` or `abort`; on failure the ledger
 * drains the streams first, because queued work may still read what it is
 * about to release.
 *
 * @module
 */

import type { ArenaMemory } from "../arena_index.ts";
import type { CopyJob, CopyStats, DeviceEvent } from "../copy_job.ts";
import type { Block } from "../memory/block_pool_types.ts";
import type { Storage } from "../memory/storage.ts";
import type { Route } from "../route.ts";
import type { BackgroundRange } from "../staging/background.ts";
import { CUDA_LEDGER_OPS, type LedgerOps, type LedgerRoute } from "./ledger_ops.ts";
import { readingEnded, readingStarted } from "../reuse/holders.ts";

/** Holds on a copy's inputs taken before it waited for memory. */
export interface InputHolds {
  readonly storages: readonly Pick<Storage, "retain" | "release">[];
  readonly arenas: readonly Pick<ArenaMemory, "hold" | "release">[];
}

/** The ledger of one copy (Note [Submission lifetime], above). */
export class Submission {
  /** What the copy did, for `AsyncCopyHandle.stats()`. */
  readonly stats: CopyStats;
  readonly #route: LedgerRoute;
  readonly #ops: LedgerOps;
  readonly #staging: Block[] = [];
  readonly #retained: Pick<Storage, "retain" | "release">[] = [];
  readonly #outputs: Pick<Storage, "retain" | "release">[] = [];
  readonly #fences: DeviceEvent[] = [];
  readonly #events: DeviceEvent[] = [];
  // The devices involved, few (a list: a Set per copy cost more than its lookups).
  readonly #devices: number[] = [];
  readonly #arenas: Pick<ArenaMemory, "hold" | "release">[] = [];
  #background: BackgroundRange[] | undefined;
  // Whether the inputs were held before the copy waited for memory.
  readonly #inputsHeld: boolean = false;
  // Whether the holds in #retained are noted as a queued copy's reads (reuse/holders.ts).
  #reading = false;

  /** Counters of `route`'s copy before anything was queued. */
  static emptyStats(route: Pick<Route, "tensors" | "bytes">): CopyStats {
    return { tensors: route.tensors, bytes: route.bytes, packedTensors: 0, chunks: 0, copies: 0 };
  }

  /**
   * Holds `route`'s inputs now: its input storages and the arenas it reads.
   * A copy that waits for memory takes these before it waits, so that an
   * input disposed (or an arena reset or freed) meanwhile stays what the
   * walk found, as it would for a copy that ran at once; the route records
   * where the inputs' bytes lie, since a disposed tensor no longer says
   * (Note [Copies that wait for memory] in admission.ts).
   */
  static holdInputs(route: LedgerRoute): InputHolds {
    route.captureSources();
    const storages = route.inputStorages();
    const arenas = [...new Set(route.arenas)];
    // No user code ran since the walk, which refuses disposed tensors: every
    // storage still has a hold to add to.
    for (const storage of storages) storage.retain();
    for (const arena of arenas) arena.hold();
    return { storages, arenas };
  }

  /** Gives back holds of {@linkcode Submission.holdInputs} of a copy that never ran. */
  static releaseInputs({ storages, arenas }: InputHolds): void {
    for (const storage of storages) storage.release();
    for (const arena of arenas) arena.release();
  }

  /**
   * A ledger for `route`, counting into `stats` (fresh by default); `held`: the input holds
   * taken before the copy waited, which it takes over; `ops`: the pinned
   * pool and event operations (CUDA's unless a test gives others).
   */
  constructor(
    route: LedgerRoute,
    stats: CopyStats = Submission.emptyStats(route),
    held?: InputHolds,
    ops: LedgerOps = CUDA_LEDGER_OPS,
  ) {
    this.#route = route;
    this.#ops = ops;
    this.stats = stats;
    if (held) {
      this.#inputsHeld = true;
      this.#retained.push(...held.storages);
      this.#arenas.push(...held.arenas);
    }
  }

  /** Notes that the copy queues work on `device` (it gets a completion event). */
  involve(device: number): void {
    if (!this.#devices.includes(device)) this.#devices.push(device);
  }

  /** A pinned block of at least `bytes`, released when the copy settles. */
  takeStaging(bytes: number): Block {
    const block = this.#ops.acquireStaging(bytes);
    this.#staging.push(block);
    return block;
  }

  /** Takes over `block`, a pinned block staged already, released as {@linkcode Submission.takeStaging}'s. */
  adoptStaging(block: Block): void {
    this.#staging.push(block);
  }

  /**
   * Holds `storage`, pinned memory the copy writes its outputs into, until
   * the copy settles (Note [Submission lifetime]).
   */
  holdOutput(storage: Pick<Storage, "retain" | "release">): void {
    storage.retain();
    this.#outputs.push(storage);
  }

  /** Keeps `arena` from being reset or freed until the copy settles. */
  holdArena(arena: Pick<ArenaMemory, "hold" | "release">): void {
    if (this.#inputsHeld) return;
    arena.hold();
    this.#arenas.push(arena);
  }

  /** An event of `device` for ordering, released when the copy settles. */
  fence(device: number): number {
    const event = this.#ops.acquireEvent(device);
    this.#fences.push({ device, event });
    return event;
  }

  /** Leaves a pageable range to be staged and sent in the background. */
  stageInBackground(range: BackgroundRange): void {
    (this.#background ??= []).push(range);
  }

  /** Records the completion event of `device` after the work queued so far. */
  recordCompletion(device: number): void {
    const event = this.#ops.acquireEvent(device);
    this.#events.push({ device, event });
    this.#ops.recordEvent(device, event);
  }

  /**
   * The job for the handle: the target's completion event is recorded now,
   * or once background staging has queued its pieces. `complete` runs when the
   * copy has completed, after the ledger released what it held.
   */
  job(complete: () => void): CopyJob<void> {
    // The inputs' storages (the walk collected them) are held from here on,
    // after the transfers were queued, so that the retains overlap the DMA:
    // no user code ran since the walk (a copy that waited for memory held
    // them before it waited).
    if (!this.#inputsHeld) {
      for (const storage of this.#route.inputStorages()) {
        storage.retain();
        this.#retained.push(storage);
      }
    }
    if (this.#retained.length > 0) {
      readingStarted(this.#retained);
      this.#reading = true;
    }
    const target = this.#route.target;
    const ops = this.#ops;
    let submitted: Promise<void> | undefined;
    if (this.#devices.includes(target)) {
      const event = ops.acquireEvent(target);
      this.#events.push({ device: target, event });
      if (this.#background) {
        submitted = ops.stageInBackground(this.#background).then(() =>
          ops.recordEvent(target, event)
        );
      } else {
        ops.recordEvent(target, event);
      }
    }
    return {
      events: this.#events,
      submitted,
      stats: this.stats,
      complete: () => {
        this.#release();
        complete();
      },
      abort: () => this.abort(),
    };
  }

  /** Drains the streams, then releases everything and disposes the outputs. */
  abort(): void {
    for (const device of this.#devices) {
      try {
        this.#ops.drainStream(device);
      } catch {
        // The copy already failed; what matters now is releasing memory.
      }
    }
    for (const { device, event } of this.#events) this.#ops.releaseEvent(device, event);
    this.#events.length = 0;
    for (const output of this.#route.outputs) output.dispose();
    this.#release();
  }

  #release(): void {
    if (this.#reading) readingEnded(this.#retained);
    this.#reading = false;
    for (const block of this.#staging) this.#ops.releaseStaging(block);
    for (const storage of this.#retained) storage.release();
    for (const storage of this.#outputs) storage.release();
    for (const { device, event } of this.#fences) this.#ops.releaseEvent(device, event);
    for (const arena of this.#arenas) arena.release();
    this.#staging.length =
      this.#retained.length =
      this.#outputs.length =
      this.#fences.length =
      this.#arenas.length =
        0;
  }
}
