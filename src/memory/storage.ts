/**
 * Reference-counted ownership of a pooled memory block shared by tensors.
 *
 * A packed chunk backs many tensors; the block returns to its pool when the
 * last of them is disposed. A FinalizationRegistry is the fallback for
 * tensors that are dropped without `dispose()`: it registers the storage
 * (one registration per block, not per tensor) and returns the block to the
 * pool when the storage is collected. It never frees memory itself.
 *
 * @module
 */

import type { BlockPool } from "./block_pool.ts";
import type { Block } from "./block_pool_types.ts";

/** The block of a pending storage (see `Storage.pending`). */
const PENDING_BLOCK = { address: 0, size: 0 } as Block;

interface Held {
  pool: BlockPool;
  block: Block;
}

const registry = new FinalizationRegistry<Held>((held) => {
  held.pool.release(held.block);
});

/** A pooled block with a count of the holds on it. */
export class Storage {
  // Assigned once: at construction, or by `attach` for a pending storage.
  #block: Block;
  readonly #pool: BlockPool;
  #refs: number;
  // Tensors over this storage disposed so far (see `disposals`).
  #disposals = 0;

  /** Takes ownership of `block` with `refs` initial holds. */
  constructor(pool: BlockPool, block: Block, refs: number) {
    this.#pool = pool;
    this.#block = block;
    this.#refs = refs;
    if (block !== PENDING_BLOCK) registry.register(this, { pool, block }, this);
  }

  /**
   * A storage of `pool` whose block is not known yet: outputs are bound to
   * it while the walk places them in a chunk, and {@linkcode Storage.attach}
   * gives it the chunk's block once the walk is done. Until then it holds
   * nothing, and releasing it does nothing.
   */
  static pending(pool: BlockPool): Storage {
    return new Storage(pool, PENDING_BLOCK, 0);
  }

  /** Gives a pending storage its block and `refs` holds (its bound tensors). */
  attach(block: Block, refs: number): void {
    if (this.#block !== PENDING_BLOCK) throw new Error("Cannot attach a block to a bound storage");
    this.#block = block;
    this.#refs = refs;
    registry.register(this, { pool: this.#pool, block }, this);
  }

  /** The block. */
  get block(): Block {
    return this.#block;
  }

  /** Address of the block's first byte. */
  get address(): number {
    return this.#block.address;
  }

  /** How many holds the storage has (0 once released, or while pending). */
  get holds(): number {
    return this.#refs;
  }

  /**
   * A count that moves whenever a tensor over this storage is disposed:
   * while it stands still, every tensor over it seen alive is alive still (a copy
   * into a result checks its tensors only when it moved: into/holds.ts).
   */
  get disposals(): number {
    return this.#disposals;
  }

  /**
   * A disposal of tensors over this storage starts, whose holds are
   * dropped later (`releaseHolds`): {@linkcode Storage.disposals} moves
   * now, so that a check meanwhile reads the tensors themselves.
   */
  disposing(): void {
    this.#disposals++;
  }

  /** Drops the hold of a tensor being disposed (counted in {@linkcode Storage.disposals}). */
  releaseDisposed(): void {
    this.#disposals++;
    this.release();
  }

  /** Whether the block was returned to its pool. */
  get released(): boolean {
    return this.#refs === 0;
  }

  /** Adds a hold. */
  retain(): void {
    if (this.#refs === 0) throw new Error("Cannot retain a released storage");
    this.#refs++;
  }

  /**
   * Drops the holds of `count` tensors being disposed at once (a disposal
   * of many of them), as `count` calls of {@linkcode Storage.releaseDisposed} would (those past the
   * last hold do nothing); the last one returns the block to its pool.
   */
  releaseHolds(count: number): void {
    if (count <= 0) return;
    this.#disposals += count;
    if (this.#refs === 0) return;
    this.#refs = Math.max(0, this.#refs - count);
    if (this.#refs === 0) {
      registry.unregister(this);
      this.#pool.release(this.#block);
    }
  }

  /** Drops a hold; the last one returns the block to its pool. */
  release(): void {
    if (this.#refs === 0) return;
    if (--this.#refs === 0) {
      registry.unregister(this);
      this.#pool.release(this.#block);
    }
  }
}
