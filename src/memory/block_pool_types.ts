/**
 * The shapes a block pool (`block_pool.ts`) is made of and made with: its
 * blocks, the allocator and shared cache it is given, its options and its
 * counters.
 *
 * Apart from the pool because the rooms above it (the transfers' chunks and
 * ledgers, storages, the process cache) hold blocks and pools by these
 * shapes without the pool's code, and because they are what a test injects
 * to run the pool without a GPU.
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
  /**
   * Whether a user moved the block's memory away (pinned: its buffer was
   * transferred): such a block is never reused, only freed (the shim frees
   * it once the moved buffer is gone).
   */
  escaped?(block: Block): boolean;
}

/**
 * A cache of idle blocks shared with the other isolates of the process.
 *
 * Each isolate (the main thread, a Worker) has its own pools, but idle
 * memory must be the process's: an isolate that ends without running
 * JavaScript again (a Worker) would strand what its pools cache. So a pool
 * given a `shared` cache (the shim's process-wide one,
 * src/memory/process_cache.ts) keeps only a small front of idle blocks for
 * itself (`frontBytes`) and gives the rest to the shared cache, which it
 * takes from before allocating. The front is for pinned memory, whose blocks
 * carry this isolate's JS views: only this isolate can detach them, so a
 * block leaves the front only through `unmap` (views detached). The shim
 * knows which isolate holds which block (in use or in a front) and takes
 * them back when the isolate's thread ends. Without a shared cache (tests)
 * every idle block stays in the pool, up to `maxCachedBytes`.
 */
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
  /**
   * Smallest block size (default 4096); from it on sizes round up to a power
   * of two, so rounding never costs more than 2x.
   */
  minBlockBytes?: number;
  /** Requests above this get their exact size, so huge blocks are not wasted (default 64 MiB). */
  exactAboveBytes?: number;
  /** Cached (idle) bytes kept at most: a release past them frees (default 1 GiB). */
  maxCachedBytes?: number;
  /**
   * The pool's limit on held bytes, read when it matters (default: none).
   * It is enforced before a copy starts (Note [Copies that wait for memory]
   * in src/transfer/admission.ts); the pool only keeps idle blocks from
   * holding memory past it.
   */
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
