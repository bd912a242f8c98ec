/**
 * A caching pool of native memory blocks (pinned host or device memory).
 *
 * Design note (the invariants the rest of the library relies on):
 * - A block is handed out again only after `release()`, and callers release
 *   a block only once no queued GPU work can still touch it, or when all
 *   later work on it is ordered on the same CUDA stream (device memory).
 * - Sizes round up to a power of two from `minBlockBytes` up to
 *   `exactAboveBytes`; larger requests get their exact size, so rounding
 *   never costs more than 2x and huge blocks are not wasted. A request is
 *   never given a smaller block.
 * - Idle blocks. Each isolate (the main thread, a Worker) has its own pools,
 *   but idle memory must be the process's: an isolate that ends without
 *   running JavaScript again (a Worker) would strand what its pools cache.
 *   So a pool given a `shared` cache (the shim's process-wide one,
 *   src/memory/process_cache.ts) keeps only a small front of idle blocks
 *   for itself (`frontBytes`) and gives the rest to the shared cache, which
 *   it takes from before allocating. The front is for pinned memory, whose
 *   blocks carry this isolate's JS views: only this isolate can detach them,
 *   so a block leaves the front only through `unmap` (views detached). The
 *   shim knows which isolate holds which block (in use or in a front) and
 *   takes them back when the isolate's thread ends. Without a shared cache
 *   (tests) every idle block stays in the pool, up to `maxCachedBytes`.
 * - Memory goes back to the OS only in `trim()`, when a release would push
 *   the cached bytes over `maxCachedBytes`, or when the pool holds more than
 *   its limit (`limitBytes`): never on the hot path otherwise. The limit is
 *   enforced before a copy starts (Note [Copies that wait for memory] in
 *   src/transfer/admission.ts); here it only keeps idle blocks from holding
 *   memory past it.
 * - If the allocator fails, the pool frees what it caches and retries once.
 * The allocator and the shared cache are injected, so this file is tested
 * without a GPU.
 *
 * @module
 */

/** A block of native memory owned by a pool. */
export interface Block {
  /** Address of the first byte. */
  readonly address: number;
  /** Usable size in bytes (at least what was asked for). */
  readonly size: number;
  /** Its record in the shared cache, where it has one. */
  readonly id?: number;
  /** Per-block cache the owner may use (e.g. JS views of pinned memory). */
  cache?: unknown;
}

/** How a pool gets and returns memory. */
export interface BlockAllocator {
  /** Allocates `bytes`, returning the address; throws on failure. */
  alloc(bytes: number): number;
  /** Frees a block. Called with no live use of it. */
  free(block: Block): void;
  /** Called before a block leaves this isolate for the shared cache (pinned: detach its views). */
  unmap?(block: Block): void;
}

/** A cache of idle blocks shared with the other isolates of the process. */
export interface SharedBlockCache {
  /** Changes whenever some isolate asks every pool to free its front. */
  readonly flushEpoch: number;
  /** Idle bytes in the cache (given back by any isolate). */
  readonly cachedBytes: number;
  /** Bytes held by every isolate together: in use anywhere, and cached. */
  readonly processBytes: number;
  /** An idle block of exactly `size` bytes, or undefined. */
  take(size: number): Block | undefined;
  /** Registers memory this pool just allocated; returns its block. */
  adopt(address: number, size: number): Block;
  /** Caches `block` for any isolate, or frees it past `maxCachedBytes`. */
  give(block: Block, maxCachedBytes: number): void;
  /** Frees the blocks idle for `olderThanMs` or more; what it freed, and when the next is due. */
  trim(olderThanMs: number): { freed: number; nextMs: number };
}

/** Pool sizing policy. */
export interface BlockPoolOptions {
  /** Smallest block size (default 4096). */
  minBlockBytes?: number;
  /** Requests above this get their exact size (default 64 MiB). */
  exactAboveBytes?: number;
  /** Cached (idle) bytes kept at most (default 1 GiB). */
  maxCachedBytes?: number;
  /** The pool's limit on held bytes, read when it matters (default: none). */
  limitBytes?: () => number;
  /** Called after every release (starts the idle-release timer). */
  onRelease?: () => void;
  /** The cache shared with other isolates (default: none; idle blocks stay here). */
  shared?: SharedBlockCache;
  /** With a shared cache: idle bytes this pool keeps for itself (default 0). */
  frontBytes?: number;
}

/** Counters of a pool, for tests and benchmarks. */
export interface BlockPoolStats {
  /** Acquisitions served from the cache. */
  hits: number;
  /** Acquisitions that allocated. */
  misses: number;
  /** Bytes held: in use here, plus the idle bytes cached (here and shared). */
  reservedBytes: number;
  /** Bytes handed out and not yet released. */
  inUseBytes: number;
  /** The most bytes held at once (as `reservedBytes` counts them). */
  peakReservedBytes: number;
  /** The pool's limit on held bytes (Infinity: none). */
  limitBytes: number;
  /** Bytes of this kind held by every isolate of the process together. */
  processBytes: number;
}

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
    if (this.reservedBytes + bytes > limit && this.cachedBytes > 0) this.trim();
    return this.#inUse + bytes <= limit;
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
    let block = this.#front.get(size)?.pop();
    if (block !== undefined) {
      this.#frontBytes -= size;
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
    if (this.#inUse + block.size + this.cachedBytes > this.#limit()) {
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
    return this.#trimFront() + (this.#shared?.trim(0).freed ?? 0);
  }

  /** Frees the idle blocks this pool keeps for itself (not the shared cache's); returns the bytes freed. */
  trimFront(): number {
    return this.#trimFront();
  }

  /**
   * Frees every block, idle or in use: for the end of an isolate without a
   * shared cache, after the GPU work that uses them has drained. Later
   * releases of those blocks are ignored. Returns the bytes freed.
   */
  releaseAll(): number {
    let freed = this.#trimFront();
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

  #trimFront(): number {
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
    this.#trimFront();
  }
}
