/**
 * Copies back during a compiled walk: the CUDA→CPU leaves of a result that
 * lies in order in one device block (a copy's result copied back whole, the
 * commonest copy back) taken as the plan reaches them.
 *
 * The route's general path records each such leaf in its columns; the
 * transfer then finds the runs among them (transfer/mirror_runs.ts) and
 * binds each output in a third loop. {@linkcode MirrorWalk} applies the
 * same run rules leaf by leaf as the walk meets them, and creates each
 * output bound at its place in the run's pinned block, laid out as the
 * device range (the block comes at the transfer: a pending storage until
 * then). The first leaf that would not join the run (on another device or
 * in another block, out of order, more than {@linkcode MAX_DEVICE_RUN_GAP}
 * bytes after the last, larger than a packed leaf, taking the range past
 * `maxPackedChunkBytes`, empty before any other, a CPU leaf, a disposed
 * tensor) turns it off,
 * and the route takes over the leaves taken so far as though it had walked
 * them itself; so does a walk that took only one (a run has two members at
 * least). The outcome (outputs, their places, bytes sent) is the general
 * path's.
 *
 * @module
 */

import { CPU } from "./device.ts";
import { forgetPackingHistories, PackingHistory } from "./packing_history.ts";
import type { Storage } from "./memory/storage.ts";
import type { TypedArray } from "./dtype.ts";
import { type Tensor, tensorInternals } from "./tensor.ts";
import { type LeafTaker, NOT_TAKEN, type TakerState } from "./walk/leaf_sink.ts";

/**
 * The widest gap between neighbours of a run on a device: a packed chunk's
 * padding is under 16 bytes by default. (Runs from a host arena carry up
 * to `MAX_RUN_GAP` of transfer/from_arena.ts, 4 KiB, where a producer
 * interleaves other data.)
 */
export const MAX_DEVICE_RUN_GAP = 256;

/**
 * The alignment a run's pinned block keeps of the device range's start
 * (`CHUNK_BASE_ALIGNMENT` of transfer/chunks.ts, which a test holds equal):
 * each output keeps its device address's alignment.
 */
export const MIRROR_BASE_ALIGNMENT = 256;

/** A run a walk took: one DMA from the device range into a pinned block. */
export interface MirrorRun {
  /** The device the leaves lie on. */
  readonly source: number;
  /** The pooled storage (device block) they lie in. */
  readonly input: Storage;
  /** The device address of the range's first byte. */
  readonly start: number;
  /** The range's bytes (its last leaf's end less `start`). */
  readonly bytes: number;
  /** Where the range starts in the pinned block (`start` modulo the base alignment). */
  readonly lead: number;
  /** The pending pinned storage the outputs are bound to. */
  readonly storage: Storage;
  /** Leaves taken (the route's indices 0 to count - 1). */
  readonly count: number;
}

/** The limits of a run (the route's options). */
export interface MirrorLimits {
  /** The largest leaf in a run (a packed leaf's limit). */
  readonly leafLimit: number;
  /** The largest range (`maxPackedChunkBytes`). */
  readonly chunkLimit: number;
}

// As the packed walk's: two hand-overs in a row pause a structure's mirror
// walks for 64 copies, kept with the structure's plan (a PackingHistory of
// their own, whose payload they do not use).
const counts = { taken: 0, handedOver: 0 };

/** How many mirror walks took every leaf, and how many handed over, since the process started. */
export function mirrorWalkCounts(): { taken: number; handedOver: number } {
  return { ...counts };
}

/** For tests: forgets past walks (failures and the pause after them; packed walks' too). */
export function resetMirrorWalks(): void {
  forgetPackingHistories();
}

/**
 * The state of one walk of a copy back. `tensor` takes a leaf and returns
 * its output, or {@linkcode NOT_TAKEN} (and turns the walk off).
 */
export class MirrorWalk implements LeafTaker {
  /** Whether leaves are still taken. */
  on = true;
  /** Leaves taken. */
  count = 0;
  /** Payload bytes taken. */
  bytes = 0;
  readonly #limits: MirrorLimits;
  readonly #leaves: unknown[];
  readonly #outputs: Tensor[];
  readonly #pendingStorage: () => Storage;
  readonly #takeOver: () => void;
  #pending: Storage | undefined;
  #source = CPU;
  #input: Storage | undefined;
  #start = 0;
  #end = 0;
  #lead = 0;
  #lone = false;
  // The history of the structure walked (set by `begin`).
  #history: PackingHistory | undefined;

  /**
   * A walk within `limits`, writing the route's `leaves` and `outputs`
   * columns from index 0; `pending` makes the pending pinned storage of the
   * outputs; `takeOver` is called when the walk turns off with leaves taken.
   */
  constructor(
    limits: MirrorLimits,
    columns: { readonly leaves: unknown[]; readonly outputs: Tensor[] },
    pending: () => Storage,
    takeOver: () => void,
  ) {
    this.#limits = limits;
    this.#leaves = columns.leaves;
    this.#outputs = columns.outputs;
    this.#pendingStorage = pending;
    this.#takeOver = takeOver;
  }

  /**
   * A plan's walk starts: takes leaves unless the structure's mirror walks
   * are paused after hand-overs (a pause per structure, as the packed
   * walk's: one structure that hands over pauses no other).
   */
  begin(state: TakerState): boolean {
    const history = (state.mirror ??= new PackingHistory()) as PackingHistory;
    if (!history.walks()) {
      this.on = false;
      return false;
    }
    this.#history = history;
    return true;
  }

  /** The device of the leaves taken (the first one's). */
  get source(): number {
    return this.#source;
  }

  /** The device block the leaves taken lie in (undefined before the first). */
  get input(): Storage | undefined {
    return this.#input;
  }

  /** A TypedArray leaf: a CPU leaf, never in a run. */
  array(_leaf: TypedArray, _code: number): typeof NOT_TAKEN {
    return this.#off();
  }

  /** A `Tensor` leaf. */
  tensor(leaf: Tensor): Tensor | typeof NOT_TAKEN {
    if (!this.on) return NOT_TAKEN;
    const source = tensorInternals.device(leaf);
    const bytes = leaf.byteLength;
    if (bytes === 0) return this.#takeEmpty(leaf, source);
    // A CPU tensor, or a disposed one (no storage left).
    const input = source === CPU ? undefined : tensorInternals.storage(leaf);
    if (input === undefined || bytes > this.#limits.leafLimit) return this.#off();
    const address = tensorInternals.address(leaf);
    if (this.count === 0) {
      this.#source = source;
      this.#input = input;
      this.#start = this.#end = address;
      this.#lead = address % MIRROR_BASE_ALIGNMENT;
    } else if (
      source !== this.#source || input !== this.#input || address < this.#end ||
      address - this.#end > MAX_DEVICE_RUN_GAP
    ) {
      return this.#off();
    }
    if (address + bytes - this.#start > this.#limits.chunkLimit) return this.#off();
    const output = tensorInternals.packedOutput(
      leaf,
      CPU,
      this.#pending ??= this.#pendingStorage(),
      this.#lead + address - this.#start,
    );
    this.#take(leaf, output);
    this.bytes += bytes;
    this.#end = address + bytes;
    return output;
  }

  // An empty leaf joins the open run wherever it lies (as the run finder
  // has it), its output bound at the block's first byte (it views no
  // byte); one before any other, or of another device, turns the walk off.
  #takeEmpty(leaf: Tensor, source: number): Tensor | typeof NOT_TAKEN {
    if (this.count === 0 || source !== this.#source || leaf.disposed) return this.#off();
    const output = tensorInternals.packedOutput(leaf, CPU, this.#pending!, 0);
    this.#take(leaf, output);
    return output;
  }

  #take(leaf: Tensor, output: Tensor): void {
    const index = this.count++;
    this.#leaves[index] = leaf;
    this.#outputs[index] = output;
  }

  /**
   * The walk is over: the run, when every leaf was taken and there are two
   * at least; else undefined (nothing was taken, or the route took over:
   * a lone leaf is handed over here). Records how the walk went.
   */
  finish(): MirrorRun | undefined {
    if (!this.on || this.count === 0) return undefined;
    if (this.count < 2) {
      // Not a failure of the walk (a copy back of one tensor is common).
      this.#lone = true;
      this.#off();
      return undefined;
    }
    this.#history?.succeeded();
    counts.taken++;
    return {
      source: this.#source,
      input: this.#input!,
      start: this.#start,
      bytes: this.#end - this.#start,
      lead: this.#lead,
      storage: this.#pending!,
      count: this.count,
    };
  }

  /** Turns the walk off; the route takes over the leaves taken (their outputs are bound again). */
  handOver(): void {
    this.on = false;
    counts.handedOver++;
    if (!this.#lone) this.#history?.failed();
  }

  /** Turns the walk off: a leaf reached the route another way (see `PackedWalk.stop`). */
  stop(): void {
    if (this.count > 0) this.#off();
    else this.on = false;
  }

  /** A walk that threw: off, nothing to give back. */
  abandon(): void {
    this.on = false;
  }

  #off(): typeof NOT_TAKEN {
    if (this.on) {
      this.on = false;
      if (this.count > 0) this.#takeOver();
    }
    return NOT_TAKEN;
  }
}
