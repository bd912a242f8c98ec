/**
 * What the packed walks of one structure (one compiled plan) learned: the
 * last payload, which sizes the next walk's block and limit, and the pause
 * after hand-overs in a row (which mirror walks keep the same way, in a
 * history of their own).
 *
 * Kept per structure, not per process: a loop that copies its batch (which
 * packs) and another structure that always hands over (a leaf already on
 * the device) would otherwise pause the batch's packing, and the other
 * structure's payload would size the batch's block.
 *
 * @module
 */

import { HandOverPause } from "./hand_over_pause.ts";

/**
 * The largest payload packed during a walk: from about here on, a chunk
 * is packed after the walk by several threads (staging/parallel_pack.ts)...
 */
const PACKED_WALK_MAX_BYTES = 256 * 1024;
/**
 * ...unless its leaves are small (at most SMALL_LEAF_BYTES each on
 * average, as the last payload's were): then the threads' work per leaf
 * (an address and a piece each) costs more than the walk's `set`, and
 * payloads up to SMALL_LEAVES_MAX_BYTES are packed during the walk (on an
 * H100 host: 100,000 leaves of 8 bytes 0.71×, the 64-sample reference
 * batch, 271 bytes a leaf, 0.78× of packing them after the walk).
 */
const SMALL_LEAF_BYTES = 512;
const SMALL_LEAVES_MAX_BYTES = 4 * 1024 * 1024;
/** The smallest block a walk takes. */
const MIN_BLOCK_BYTES = 64 * 1024;

// Histories made before the last `forgetPackingHistories()` start afresh.
let epoch = 0;

/**
 * One structure's packing history.
 *
 * @example A payload of small leaves opens larger payloads to the walk
 * ```ts
 * import assert from "node:assert/strict";
 * import { PackingHistory } from "./packing_history.ts";
 * const history = new PackingHistory();
 * assert.equal(history.payloadLimit(), 256 * 1024);
 * history.notePayload(1_600_000, 100_000); // 16 bytes a leaf
 * assert.equal(history.payloadLimit(), 4 * 1024 * 1024);
 * assert.equal(history.blockBytes(32 * 1024 * 1024), 2_000_000);
 * ```
 */
export class PackingHistory {
  #epoch = epoch;
  #lastPayload = 0;
  #lastLeaves = 0;
  // Two hand-overs in a row pause this structure's packed walks for 64 copies.
  readonly #pause = new HandOverPause(2, 64);

  /**
   * The largest payload a walk may pack (see PACKED_WALK_MAX_BYTES), as
   * the last payload's leaves were.
   */
  payloadLimit(): number {
    this.#fresh();
    return this.#lastLeaves > 0 && this.#lastPayload <= SMALL_LEAF_BYTES * this.#lastLeaves
      ? SMALL_LEAVES_MAX_BYTES
      : PACKED_WALK_MAX_BYTES;
  }

  /**
   * Counts a copy; the block size its walk takes (the last payload with
   * room to grow, at most `chunkLimit` and the payload limit), or 0 while
   * the structure's walks are paused, and where the last payload exceeded
   * either limit (the walk could only fill a block, hand over and give it
   * back; the route notes each copy's payload, so a payload that shrinks
   * opens the walk again).
   */
  blockBytes(chunkLimit: number): number {
    if (!this.walks()) return 0;
    const last = this.#lastPayload;
    const limit = Math.min(chunkLimit, this.payloadLimit());
    if (last > limit) return 0;
    return Math.min(limit, Math.max(MIN_BLOCK_BYTES, last + (last >> 2)));
  }

  /** The copy's payload was `bytes` in `leaves` leaves. */
  notePayload(bytes: number, leaves: number): void {
    this.#fresh();
    this.#lastPayload = bytes;
    this.#lastLeaves = leaves;
  }

  /** Counts a copy; whether its walk may run (not while the structure's walks are paused). */
  walks(): boolean {
    this.#fresh();
    return this.#pause.next();
  }

  /** A walk took every leaf: the run of hand-overs ends. */
  succeeded(): void {
    this.#fresh();
    this.#pause.succeeded();
  }

  /**
   * A walk handed over after packing `bytes` in `leaves` (a lower bound of
   * the payload, which the route notes in full when it can).
   */
  handedOver(bytes: number, leaves: number): void {
    this.#fresh();
    if (bytes > this.#lastPayload) this.notePayload(bytes, leaves);
    // A walk off at its first leaf (one too large, on a device, ...) wasted
    // nothing: no reason to pause.
    if (leaves > 0) this.failed();
  }

  /** A walk handed over: two in a row pause the structure's walks. */
  failed(): void {
    this.#fresh();
    this.#pause.failed();
  }

  #fresh(): void {
    if (this.#epoch === epoch) return;
    this.#epoch = epoch;
    this.#lastPayload = this.#lastLeaves = 0;
    this.#pause.reset();
  }
}

/** For tests: every structure's history starts afresh (payloads, pauses). */
export function forgetPackingHistories(): void {
  epoch++;
}
