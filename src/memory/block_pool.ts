/**
 * A caching pool of native memory blocks (pinned host or device memory).
 *
 * Design note (the invariants the rest of the library relies on):
 * - A block is handed out again only after `release()`, and callers release
 *   a block only once no queued GPU work can still touch it, or when all
 *   later work on it is ordered on the same CUDA stream (device memory).
 * - A request is never given a smaller block; sizes round up to a power of
 *   two between two bounds (`BlockPoolOptions` says which and why).
 * - Idle blocks live in this pool's front and, past it, in the shared cache
 *   where one is given (`SharedBlockCache` says why).
 * - Memory goes back to the OS only in `trim()`, past `maxCachedBytes`, or
 *   past the pool's limit (`limitBytes`): never on the hot path otherwise.
 * - If the allocator fails, the pool frees what it caches and retries once.
 *
 * @module
 */

import type {
  Block,
  BlockAllocator,
  BlockPoolOptions,
  BlockPoolStats,
  SharedBlockCache,
} from "./block_pool_types.ts";

/** A caching pool of memory blocks; see the design note above. */
export class BlockPool {
  readonly #allocator: BlockAllocator;
  readonly #minBlock: number;
  readonly #exactAbove: number;
  readonly #maxCached: number;
  readonly #limit: () => number;
  readonly #onRelease: (() => void) | undefined;
  readonly #shared: SharedBlockCache | undefined;
  readonly #frontCap: number;
  readonly #front = new Map<number, Block[]>();
  readonly #live = new Set<Block>();
  #frontBytes = 0;
  #inUse = 0;
  #hits = 0;
  #misses = 0;
  #peak = 0;
  #uses = 0;
  // The shared cache's flush epoch this pool last acted on (NaN: none yet).
  #epoch = NaN;

  /** Creates an empty pool over `allocator`. */
  constructor(allocator: BlockAllocator, options: BlockPoolOptions = {}) {
    this.#allocator = allocator;
    this.#minBlock = options.minBlockBytes ?? 4096;
    this.#exactAbove = options.exactAboveBytes ?? 64 * 1024 * 1024;
    this.#maxCached = options.maxCachedBytes ?? 1024 * 1024 * 1024;
    this.#limit = options.limitBytes ?? (() => Infinity);
    this.#onRelease = options.onRelease;
    this.#shared = options.shared;
    this.#frontCap = this.#shared
      ? Math.min(options.frontBytes ?? 0, this.#maxCached)
      : this.#maxCached;
  }

  /** The pool's limit on held bytes now (Infinity: none). */
  get limitBytes(): number {
    return this.#limit();
  }

  /** Bytes held: in use here, plus the idle bytes cached (here and shared). */
  get reservedBytes(): number {
    return this.#inUse + this.cachedBytes;
  }

  /** Bytes handed out and not yet released. */
  get inUseBytes(): number {
    return this.#inUse;
  }

  /** Idle bytes kept for reuse: this pool's front and the shared cache. */
  get cachedBytes(): number {
    return this.#frontBytes + (this.#shared?.cachedBytes ?? 0);
  }

  /** Idle bytes this pool keeps for itself. */
  get frontBytes(): number {
    return this.#frontBytes;
  }

  /**
   * Acquisitions and releases so far: the idle release frees the front of a
   * pool whose count stood still for a while (a counter, not a clock read:
   * `performance.now()` costs about 120 ns, more than the rest of a cached
   * acquire).
   */
  get uses(): number {
    return this.#uses;
  }

  /**
   * Whether `bytes` more fit under the limit next to what is in use; frees
   * idle blocks first when they are what stands in the way.
   */
  makeRoom(bytes: number): boolean {
    const limit = this.#limit();
    // Idle blocks are freed only where that makes the room: not where the
    // request does not fit beside what is in use anyway, nor where an idle
    // block of its size is what it takes (not added to what is held).
    // Either free cost every copy under a limit below twice its staging a
    // free and an allocation of its block.
    if (this.#inUse + bytes > limit) return false;
    if (this.#front.get(this.sizeClass(bytes))?.length) return true;
    if (this.reservedBytes + bytes > limit && this.cachedBytes > 0) this.trim();
    return true;
  }

  /** The block size a request of `bytes` is served with. */
  sizeClass(bytes: number): number {
    if (bytes <= this.#minBlock) return this.#minBlock;
    if (bytes > this.#exactAbove) return bytes;
    return 2 ** Math.ceil(Math.log2(bytes));
  }

  /** Returns a block of at least `bytes` bytes. */
  acquire(bytes: number): Block {
    const size = this.sizeClass(bytes);
    const shared = this.#shared;
    if (shared !== undefined && shared.flushEpoch !== this.#epoch) this.#flush(shared);
    let block = this.#fromFront(size);
    if (block !== undefined) {
      this.#hits++;
    } else if (shared !== undefined && (block = shared.take(size)) !== undefined) {
      this.#hits++;
    } else {
      // Idle blocks of other sizes must not hold the pool over its limit.
      if (this.cachedBytes > 0 && this.reservedBytes + size > this.#limit()) this.trim();
      block = this.#allocate(size);
      this.#misses++;
      // Only an allocation adds to what is held (a cached block was counted).
      const reserved = this.reservedBytes + size;
      if (reserved > this.#peak) this.#peak = reserved;
    }
    this.#inUse += size;
    this.#live.add(block);
    this.#uses++;
    return block;
  }

  /** Gives a block back for reuse (see the design note for when). */
  release(block: Block): void {
    // A block abandoned or freed at the isolate's end is not the pool's anymore.
    if (!this.#live.delete(block)) return;
    this.#inUse -= block.size;
    this.#uses++;
    const shared = this.#shared;
    if (
      this.#inUse + block.size + this.cachedBytes > this.#limit() ||
      this.#allocator.escaped?.(block)
    ) {
      this.#allocator.free(block);
    } else if (this.#frontBytes + block.size <= this.#frontCap) {
      let list = this.#front.get(block.size);
      if (!list) this.#front.set(block.size, list = []);
      list.push(block);
      this.#frontBytes += block.size;
    } else if (shared !== undefined) {
      this.#allocator.unmap?.(block);
      shared.give(block, this.#maxCached);
    } else {
      this.#allocator.free(block);
    }
    this.#onRelease?.();
  }

  /** Frees every idle block, this pool's and the shared cache's; returns the bytes freed. */
  trim(): number {
    return this.trimFront() + (this.#shared?.trim(0).freed ?? 0);
  }

  /**
   * Frees every block, idle or in use: for the end of an isolate without a
   * shared cache, after the GPU work that uses them has drained. Later
   * releases of those blocks are ignored. Returns the bytes freed.
   */
  releaseAll(): number {
    let freed = this.trimFront();
    for (const block of this.#live) {
      this.#inUse -= block.size;
      freed += block.size;
      this.#allocator.free(block);
    }
    this.#live.clear();
    return freed;
  }

  /**
   * At the end of this isolate, with a shared cache: detaches this pool's
   * views of every block (`unmap`) and forgets the blocks, idle or in use,
   * without freeing any: the shim takes them back once the streams have
   * drained (ffi `isolateEnd`). Later releases of those blocks are ignored.
   */
  abandonAll(): void {
    for (const list of this.#front.values()) {
      for (const block of list) this.#allocator.unmap?.(block);
    }
    for (const block of this.#live) this.#allocator.unmap?.(block);
    this.#front.clear();
    this.#frontBytes = 0;
    this.#live.clear();
    this.#inUse = 0;
  }

  /** A snapshot of the pool's counters. */
  stats(): BlockPoolStats {
    const reservedBytes = this.reservedBytes;
    return {
      hits: this.#hits,
      misses: this.#misses,
      reservedBytes,
      inUseBytes: this.#inUse,
      peakReservedBytes: Math.max(this.#peak, reservedBytes),
      limitBytes: this.#limit(),
      processBytes: this.#shared?.processBytes ?? reservedBytes,
    };
  }

  // An idle block of `size` from the front; one a user moved away since it
  // came back (the buffer of an old view, kept past its dispose) is freed.
  #fromFront(size: number): Block | undefined {
    const list = this.#front.get(size);
    let block: Block | undefined;
    while ((block = list?.pop()) !== undefined) {
      this.#frontBytes -= size;
      if (!this.#allocator.escaped?.(block)) return block;
      this.#allocator.free(block);
    }
    return undefined;
  }

  #allocate(size: number): Block {
    let address: number;
    try {
      address = this.#allocator.alloc(size);
    } catch (error) {
      // Cached blocks of other sizes may be what stands in the way.
      if (this.cachedBytes === 0) throw error;
      this.trim();
      address = this.#allocator.alloc(size);
    }
    if (this.#shared === undefined) return { address, size };
    try {
      return this.#shared.adopt(address, size);
    } catch (error) {
      this.#allocator.free({ address, size });
      throw error;
    }
  }

  /** Frees the idle blocks this pool keeps for itself (not the shared cache's); returns the bytes freed. */
  trimFront(): number {
    const freed = this.#frontBytes;
    for (const list of this.#front.values()) {
      for (const block of list) this.#allocator.free(block);
    }
    this.#front.clear();
    this.#frontBytes = 0;
    return freed;
  }

  // Another isolate asked every pool to free its front (releaseCachedMemory).
  #flush(shared: SharedBlockCache): void {
    this.#epoch = shared.flushEpoch;
    this.trimFront();
  }
}
