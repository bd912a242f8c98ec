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
 * - Memory goes back to the OS only in `trim()`, when a release would push
 *   the cached bytes over `maxCachedBytes`, or when the pool holds more than
 *   its limit (`limitBytes`): never on the hot path otherwise. The limit is
 *   enforced before a copy starts (the transfer room's admission waits until
 *   a copy fits); here it only keeps idle blocks from holding memory past it.
 * - If the allocator fails, the pool frees what it caches and retries once.
 * The allocator is injected, so this file is tested without a GPU.
 *
 * @module
 */

/** A block of native memory owned by a pool. */
export interface Block {
  /** Address of the first byte. */
  readonly address: number;
  /** Usable size in bytes (at least what was asked for). */
  readonly size: number;
  /** Per-block cache the owner may use (e.g. JS views of pinned memory). */
  cache?: unknown;
}

/** How a pool gets and returns memory. */
export interface BlockAllocator {
  /** Allocates `bytes`, returning the address; throws on failure. */
  alloc(bytes: number): number;
  /** Frees a block. Called with no live use of it. */
  free(block: Block): void;
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
}

/** Counters of a pool, for tests and benchmarks. */
export interface BlockPoolStats {
  /** Acquisitions served from the cache. */
  hits: number;
  /** Acquisitions that allocated. */
  misses: number;
  /** Bytes held from the allocator (idle + in use). */
  reservedBytes: number;
  /** Bytes handed out and not yet released. */
  inUseBytes: number;
  /** The most bytes ever held from the allocator at once. */
  peakReservedBytes: number;
  /** The pool's limit on held bytes (Infinity: none). */
  limitBytes: number;
}

/** A caching pool of memory blocks; see the design note above. */
export class BlockPool {
  readonly #allocator: BlockAllocator;
  readonly #minBlock: number;
  readonly #exactAbove: number;
  readonly #maxCached: number;
  readonly #limit: () => number;
  readonly #onRelease: (() => void) | undefined;
  readonly #free = new Map<number, Block[]>();
  readonly #live = new Set<Block>();
  #cachedBytes = 0;
  #stats: BlockPoolStats = {
    hits: 0,
    misses: 0,
    reservedBytes: 0,
    inUseBytes: 0,
    peakReservedBytes: 0,
    limitBytes: Infinity,
  };
  #lastUse = 0;

  /** Creates an empty pool over `allocator`. */
  constructor(allocator: BlockAllocator, options: BlockPoolOptions = {}) {
    this.#allocator = allocator;
    this.#minBlock = options.minBlockBytes ?? 4096;
    this.#exactAbove = options.exactAboveBytes ?? 64 * 1024 * 1024;
    this.#maxCached = options.maxCachedBytes ?? 1024 * 1024 * 1024;
    this.#limit = options.limitBytes ?? (() => Infinity);
    this.#onRelease = options.onRelease;
  }

  /** The pool's limit on held bytes now (Infinity: none). */
  get limitBytes(): number {
    return this.#limit();
  }

  /** Bytes held from the allocator (idle + in use). */
  get reservedBytes(): number {
    return this.#stats.reservedBytes;
  }

  /** Bytes handed out and not yet released. */
  get inUseBytes(): number {
    return this.#stats.inUseBytes;
  }

  /** Idle bytes kept for reuse. */
  get cachedBytes(): number {
    return this.#cachedBytes;
  }

  /** `performance.now()` of the last acquire or release (0: never used). */
  get lastUse(): number {
    return this.#lastUse;
  }

  /**
   * Whether `bytes` more fit under the limit next to what is in use; frees
   * idle blocks first when they are what stands in the way.
   */
  makeRoom(bytes: number): boolean {
    const limit = this.#limit();
    if (this.#stats.reservedBytes + bytes > limit && this.#cachedBytes > 0) this.trim();
    return this.#stats.inUseBytes + bytes <= limit;
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
    const list = this.#free.get(size);
    let block = list?.pop();
    if (block) {
      this.#cachedBytes -= size;
      this.#stats.hits++;
    } else {
      // Idle blocks of other sizes must not hold the pool over its limit.
      if (this.#cachedBytes > 0 && this.#stats.reservedBytes + size > this.#limit()) this.trim();
      block = { address: this.#allocate(size), size };
      this.#stats.misses++;
      this.#stats.reservedBytes += size;
      if (this.#stats.reservedBytes > this.#stats.peakReservedBytes) {
        this.#stats.peakReservedBytes = this.#stats.reservedBytes;
      }
    }
    this.#stats.inUseBytes += size;
    this.#live.add(block);
    this.#lastUse = performance.now();
    return block;
  }

  /** Gives a block back for reuse (see the design note for when). */
  release(block: Block): void {
    // A block freed by releaseAll() (process exit) is not the pool's anymore.
    if (!this.#live.delete(block)) return;
    this.#stats.inUseBytes -= block.size;
    this.#lastUse = performance.now();
    if (
      this.#cachedBytes + block.size > this.#maxCached ||
      this.#stats.reservedBytes > this.#limit()
    ) {
      this.#freeBlock(block);
    } else {
      let list = this.#free.get(block.size);
      if (!list) this.#free.set(block.size, list = []);
      list.push(block);
      this.#cachedBytes += block.size;
    }
    this.#onRelease?.();
  }

  /** Frees every idle block; returns the bytes freed. */
  trim(): number {
    const freed = this.#cachedBytes;
    for (const list of this.#free.values()) {
      for (const block of list) this.#freeBlock(block);
    }
    this.#free.clear();
    this.#cachedBytes = 0;
    return freed;
  }

  /**
   * Frees every block, idle or in use: for process exit only, after the
   * GPU work that uses them has drained. Later releases of those blocks
   * are ignored. Returns the bytes freed.
   */
  releaseAll(): number {
    let freed = this.trim();
    for (const block of this.#live) {
      this.#stats.inUseBytes -= block.size;
      freed += block.size;
      this.#freeBlock(block);
    }
    this.#live.clear();
    return freed;
  }

  /** A snapshot of the pool's counters. */
  stats(): BlockPoolStats {
    return { ...this.#stats, limitBytes: this.#limit() };
  }

  #allocate(size: number): number {
    try {
      return this.#allocator.alloc(size);
    } catch (error) {
      // Cached blocks of other sizes may be what stands in the way.
      if (this.#cachedBytes === 0) throw error;
      this.trim();
      return this.#allocator.alloc(size);
    }
  }

  #freeBlock(block: Block): void {
    this.#stats.reservedBytes -= block.size;
    this.#allocator.free(block);
  }
}
