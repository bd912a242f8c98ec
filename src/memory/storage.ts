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

import type { Block, BlockPool } from "./block_pool.ts";

interface Held {
  pool: BlockPool;
  block: Block;
}

const registry = new FinalizationRegistry<Held>((held) => {
  held.pool.release(held.block);
});

/** A pooled block with a count of the holds on it. */
export class Storage {
  readonly block: Block;
  readonly #pool: BlockPool;
  #refs: number;

  /** Takes ownership of `block` with `refs` initial holds. */
  constructor(pool: BlockPool, block: Block, refs: number) {
    this.#pool = pool;
    this.block = block;
    this.#refs = refs;
    registry.register(this, { pool, block }, this);
  }

  /** Address of the block's first byte. */
  get address(): number {
    return this.block.address;
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

  /** Drops a hold; the last one returns the block to its pool. */
  release(): void {
    if (this.#refs === 0) return;
    if (--this.#refs === 0) {
      registry.unregister(this);
      this.#pool.release(this.block);
    }
  }
}
