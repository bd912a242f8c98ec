/**
 * Packing during a compiled walk: the CPU→CUDA leaves of a repeated
 * structure copied into their pinned chunk as the plan reaches them.
 *
 * The route's general path records each leaf in five columns (leaf, host
 * bytes, class, index, offset) during the walk, and a second loop packs
 * them from the columns: per leaf that bookkeeping cost more than the
 * `set` that copies its bytes. A compiled plan (walk/plan_code.ts) hands
 * each leaf first to {@linkcode PackedWalk}, which places it by the same
 * rule as the sequential packer, copies it into a pinned block taken
 * before the walk, and makes its output bound at its offset: one `set`,
 * one output, two stores. The first leaf it cannot take (on a device, in
 * pinned memory or a host arena, too large, past the block, empty over a
 * detached buffer, a disposed tensor) turns it off for the rest of the
 * walk: the route then takes over the leaves packed so far, as if it had
 * walked them itself ({@linkcode PackedWalk.handOver}), and the block goes
 * back. The outcome (offsets, outputs, bytes sent) is the general path's.
 *
 * A walk whose first leaf is a tensor in a host arena takes the tensors of
 * that arena instead ({@linkcode ArenaRun}): nothing is copied; each leaf
 * goes into the route's arena columns (`fromArena`, `arenaOffsets`) and its
 * output is created bound at its offset in the arena, as the route's own
 * path (`Route.#moveFromArena`) records and binds it, without the route's
 * per-leaf dispatch. The transfer sends them as any arena leaves
 * (transfer/from_arena.ts: sorted, in runs, one DMA a run).
 *
 * @module
 */

import { type ArenaMemory, arenaOf } from "./arena_index.ts";
import { ARRAY_CLASSES, CODE_SHIFT } from "./array_code.ts";
import {
  isDetached,
  isOutOfBounds,
  type TypedArray,
  viewByteLength,
  viewByteOffset,
} from "./dtype.ts";
import type { Block } from "./memory/block_pool_types.ts";
import type { Storage } from "./memory/storage.ts";
import { REJECTED_LEAF, type Tensor, tensorInternals } from "./tensor.ts";
import { forgetPackingHistories, PackingHistory } from "./packing_history.ts";
import { vectorLayout, type VectorLayouts, vectorLayouts } from "./tensor_layout.ts";
import { type LeafTaker, NOT_TAKEN, type TakerState } from "./walk/leaf_sink.ts";

/** Where a packed walk's pinned block comes from (the transfer room, which owns the pools). */
export interface PackedStages {
  /** A pinned block of at least `bytes` if the copy may take one now, else undefined. */
  acquire(bytes: number): Block | undefined;
  /** Gives back a block a walk took and did not use. */
  release(block: Block): void;
  /** Views `block` as TypedArray class `cls` (whole block). */
  view(block: Block, cls: (typeof ARRAY_CLASSES)[number]): TypedArray;
  /** The block's table of such views by class code, kept with the block (filled by the walk). */
  viewsByCode(block: Block): (TypedArray | undefined)[];
  /** A pending storage of the pinned pool (the outputs of a mirror walk: mirror_walk.ts). */
  pinnedPending(): Storage;
}

/** The leaves a packed walk took, for the route to take over or to send. */
export interface PackedLeaves {
  /** Leaves taken, in walk order (the route's indices 0 to count - 1). */
  readonly leaves: unknown[];
  /** Their outputs, bound to `storage` at their offsets. */
  readonly outputs: Tensor[];
  /** Indices of arena leaves (see `Route.fromArena`). */
  readonly fromArena: { push(index: number): void };
  /** Their offsets in their arena (see `Route.arenaOffsets`). */
  readonly arenaOffsets: { push(offset: number): void };
}

/** A chunk packed by a walk: its pinned block, and the pending storage of its outputs. */
export interface PackedChunk {
  /** The pinned block, holding the payload from its first byte. */
  readonly block: Block;
  /** The pending storage its outputs are bound to (see `Storage.pending`). */
  readonly storage: Storage;
  /** Payload bytes. */
  readonly bytes: number;
  /** Leaves packed (the route's indices 0 to count - 1). */
  readonly count: number;
}

/** The tensors of one host arena a walk took (recorded in the route's arena columns). */
export interface ArenaRun {
  /** The arena every leaf lies in. */
  readonly arena: ArenaMemory;
  /** The pending storage their outputs are bound to, each at its offset in the arena. */
  readonly storage: Storage;
}

/** Counters for tests and diagnostics. */
const counts = { packed: 0, handedOver: 0, arenaRuns: 0 };
const NO_VIEWS: (TypedArray | undefined)[] = [];

/**
 * How many walks packed every leaf, and how many handed over to the route,
 * since the process started (for tests: the differential test checks the
 * packed path ran).
 */
export function packedWalkCounts(): { packed: number; handedOver: number; arenaRuns: number } {
  return { ...counts };
}

/** For tests: forgets past walks (failures, the pause after them, the last payload). */
export function resetPackedWalks(): void {
  forgetPackingHistories();
}

/**
 * The packing state of one walk. `array` and `tensor` take a leaf and
 * return its output, or {@linkcode NOT_TAKEN} (and turn the walk off).
 */
export class PackedWalk implements LeafTaker {
  /** Whether leaves are still taken. */
  on = true;
  /** Leaves taken. */
  count = 0;
  /** End of the payload so far (offsets as the sequential packer gives them). */
  end = 0;
  /** Payload bytes taken. */
  bytes = 0;
  readonly #target: number;
  // The layouts of TypedArray leaves' outputs on the target.
  readonly #layouts: VectorLayouts;
  readonly #align: number;
  readonly #limit: number;
  readonly #chunkLimit: number;
  // The block size, set by `begin` from the structure's history.
  #capacity = 0;
  #history: PackingHistory | undefined;
  readonly #stages: PackedStages;
  readonly #leaves: unknown[];
  readonly #outputs: Tensor[];
  readonly #storage: () => Storage;
  readonly #takeOver: () => void;
  #pending: Storage | undefined;
  #block: Block | undefined;
  // The block's views by class code (kept with the block: no table per copy).
  #views: (TypedArray | undefined)[] = NO_VIEWS;
  readonly #fromArena: PackedLeaves["fromArena"];
  readonly #arenaOffsets: PackedLeaves["arenaOffsets"];
  // Arena mode: the arena of the leaves taken.
  #arena: ArenaMemory | undefined;

  /**
   * A walk to device `target` placing leaves at multiples of `align` (a
   * power of two, at least 8), each of at most `limit` bytes, into a block
   * of at most `chunkLimit` bytes (its size set by `begin`, from the
   * structure's history), recording them in the route's `leaves` and
   * `outputs` columns from index 0; `storage` makes the chunk's pending
   * storage; `takeOver` is called when the walk turns off with leaves taken
   * (see `handOver`).
   */
  constructor(
    target: number,
    { align, limit, chunkLimit }: { align: number; limit: number; chunkLimit: number },
    stages: PackedStages,
    columns: PackedLeaves,
    storage: () => Storage,
    takeOver: () => void,
  ) {
    this.#target = target;
    this.#layouts = vectorLayouts(target);
    this.#align = align;
    this.#limit = limit;
    this.#chunkLimit = chunkLimit;
    this.#fromArena = columns.fromArena;
    this.#arenaOffsets = columns.arenaOffsets;
    this.#stages = stages;
    this.#leaves = columns.leaves;
    this.#outputs = columns.outputs;
    this.#storage = storage;
    this.#takeOver = takeOver;
  }

  /**
   * A plan's walk starts: packs unless the structure's walks are paused
   * (see packing_history.ts), into a block sized from its last payload.
   */
  begin(state: TakerState): boolean {
    const history = (state.packed ??= new PackingHistory()) as PackingHistory;
    this.#capacity = history.blockBytes(this.#chunkLimit);
    if (this.#capacity === 0) {
      this.on = false;
      return false;
    }
    this.#history = history;
    return true;
  }

  /**
   * The copy's payload, where the walk did not pack it (`bytes` in
   * `leaves`), for the structure's next walk.
   */
  notePayload(bytes: number, leaves: number): void {
    this.#history?.notePayload(bytes, leaves);
  }

  /** A TypedArray leaf of class `code`. */
  array(leaf: TypedArray, code: number): Tensor | typeof NOT_TAKEN {
    if (!this.on || this.#arena !== undefined || arenaOf(leaf) !== undefined) return this.#off();
    const bytes = viewByteLength(leaf);
    if (bytes === 0 && (isDetached(leaf) || isOutOfBounds(leaf))) return this.#off();
    const offset = this.#place(bytes);
    if (offset < 0) return this.#off();
    this.#copy(leaf, code, offset);
    const output = tensorInternals.createBound(
      vectorLayout(this.#layouts, code, bytes >> CODE_SHIFT[code], this.#target),
      this.#pending ??= this.#storage(),
      offset,
    );
    this.#take(leaf, output, bytes, offset);
    return output;
  }

  /** A `Tensor` leaf. */
  tensor(leaf: Tensor): Tensor | typeof NOT_TAKEN {
    if (!this.on) return NOT_TAKEN;
    const data = tensorInternals.packedData(leaf);
    if (data === undefined) return this.#takeFromArena(leaf);
    if (this.#arena !== undefined) return this.#off();
    // (packedData checked that the data still has the layout's length.)
    const bytes = tensorInternals.layout(leaf).byteLength;
    const offset = this.#place(bytes);
    if (offset < 0) return this.#off();
    this.#copy(data, tensorInternals.code(leaf, data), offset);
    const output = tensorInternals.packedOutput(
      leaf,
      this.#target,
      this.#pending ??= this.#storage(),
      offset,
    );
    this.#take(leaf, output, bytes, offset);
    return output;
  }

  /** The arena of the leaves taken, in arena mode (see {@linkcode ArenaRun}). */
  get arena(): ArenaMemory | undefined {
    return this.#arena;
  }

  // A tensor leaf with no host data of its own: taken if it lies in the
  // walk's arena (the first leaf's), recorded as the route records it.
  #takeFromArena(leaf: Tensor): Tensor | typeof NOT_TAKEN {
    const arena = tensorInternals.arena(leaf);
    // (A walk that packed leaves has no arena: it turns off here too.)
    if (arena === undefined || (this.count > 0 && arena !== this.#arena)) return this.#off();
    const data = tensorInternals.walkData(leaf);
    if (data === undefined || data === REJECTED_LEAF) return this.#off();
    this.#arena = arena;
    const offset = viewByteOffset(data);
    const output = tensorInternals.packedOutput(
      leaf,
      this.#target,
      this.#pending ??= this.#storage(),
      offset,
    );
    const index = this.count++;
    this.#leaves[index] = leaf;
    this.#outputs[index] = output;
    this.#fromArena.push(index);
    this.#arenaOffsets.push(offset);
    this.bytes += viewByteLength(data);
    return output;
  }

  /**
   * The walk is over: the block with the packed payload (and its pending
   * storage), or the arena run, when every leaf was taken; else undefined
   * (nothing was, or the route took over). Records how the walk went for
   * the next one.
   */
  finish(): PackedChunk | ArenaRun | undefined {
    if (!this.on || this.count === 0) {
      this.#giveBack();
      return undefined;
    }
    this.#history!.succeeded();
    counts.packed++;
    const arena = this.#arena;
    if (arena !== undefined) {
      counts.arenaRuns++;
      return { arena, storage: this.#pending! };
    }
    this.#history!.notePayload(this.end, this.count);
    const block = this.#block!;
    this.#block = undefined;
    return { block, storage: this.#pending!, bytes: this.end, count: this.count };
  }

  /**
   * Turns the walk off before it took anything more; returns the pending
   * storage of the leaves taken so far (undefined if none), which the
   * route takes over with them.
   */
  handOver(): Storage | undefined {
    this.on = false;
    this.#giveBack();
    this.#history?.handedOver(this.#arena === undefined ? this.end : 0, this.count);
    counts.handedOver++;
    return this.#pending;
  }

  /** Gives back `block`, the one {@linkcode PackedWalk.finish} returned, unsent. */
  release(block: Block): void {
    this.#stages.release(block);
  }

  /** A walk that threw: gives back the block if it still holds it. */
  abandon(): void {
    this.on = false;
    this.#giveBack();
  }

  /** Gives back the block if the walk still holds it. */
  #giveBack(): void {
    if (this.#block !== undefined) this.#stages.release(this.#block);
    this.#block = undefined;
  }

  /**
   * Turns the walk off (a leaf reached the route another way: through the
   * generic walk of a part the plan does not cover, or of a structure with
   * no plan): the route takes over what was taken.
   */
  stop(): void {
    if (this.count > 0) {
      this.#off();
    } else {
      // No plan offered it anything (a generic walk): nothing to hand over,
      // and no failure of the packed path.
      this.on = false;
      this.#giveBack();
    }
  }

  #off(): typeof NOT_TAKEN {
    if (this.on) {
      this.on = false;
      this.#takeOver();
    }
    return NOT_TAKEN;
  }

  /** The offset of a leaf of `bytes`, or -1 where it does not fit. */
  #place(bytes: number): number {
    const align = this.#align;
    const offset = (this.end + align - 1) & -align;
    if (bytes > this.#limit || offset + bytes > this.#capacity) return -1;
    if (this.#block === undefined) {
      this.#block = this.#stages.acquire(this.#capacity);
      if (this.#block === undefined) return -1;
      this.#views = this.#stages.viewsByCode(this.#block);
    }
    return offset + bytes > this.#block.size ? -1 : offset;
  }

  #copy(data: TypedArray, code: number, offset: number): void {
    const view = this.#views[code] ??= this.#stages.view(this.#block!, ARRAY_CLASSES[code]);
    view.set(data as never, offset >> CODE_SHIFT[code]);
  }

  #take(leaf: unknown, output: Tensor, bytes: number, offset: number): void {
    const index = this.count++;
    this.#leaves[index] = leaf;
    this.#outputs[index] = output;
    this.bytes += bytes;
    this.end = offset + bytes;
  }
}
