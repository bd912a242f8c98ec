/**
 * This isolate's pool of pinned (page-locked) host memory, and cached JS
 * views of its blocks.
 *
 * Each pinned block is mapped into JS once (a counted external buffer,
 * about a microsecond); typed views of it are cached per TypedArray class so that
 * staging a tensor is one `view.set(src, offset)`, a memcpy. Views belong
 * to this isolate, so idle blocks with views stay in the pool's small front
 * ({@linkcode PINNED_FRONT_BYTES}); a block that leaves it for the
 * process-wide cache, or is freed, has its ArrayBuffer detached first, so
 * no JS view can reach memory another isolate reuses or frees. A buffer the
 * user detached themselves (`transfer()`, `postMessage` of a result's
 * buffer) took the memory with it: that block is never reused, and the
 * shim frees it only once the moved buffer is gone (native/host_views.c).
 *
 * @module
 */

import {
  hostAlloc,
  hostFree,
  hostKeep,
  pinnedArrayBuffer,
  pinnedBuffersCounted,
} from "../../ffi/native.ts";
import { blockFree, PINNED_KIND } from "../../ffi/process_cache.ts";
import { BlockPool } from "./block_pool.ts";
import type { Block } from "./block_pool_types.ts";
import { memoryLimits } from "./limits.ts";
import { freeUnviewedPinned, sharedCache } from "./process_cache.ts";
import { memoryReleased } from "./released.ts";
import type { TypedArray, TypedArrayConstructor } from "../dtype.ts";

interface PinnedCache {
  buffer: ArrayBuffer;
  views: Map<unknown, TypedArray>;
  /** Views by class code (array_code.ts), filled by their users (see {@linkcode pinnedViewsByCode}). */
  byCode: (TypedArray | undefined)[];
  /** Whether the shim counts `buffer` (false where the runtime gave no Node-API). */
  counted: boolean;
}

/**
 * Idle pinned bytes the pool keeps with their views for this isolate (the
 * rest goes to the process-wide cache): a steady loop's staging blocks and
 * gather tables, reused with no call and no new view.
 */
export const PINNED_FRONT_BYTES = 64 * 1024 * 1024;

// Every view of the block becomes length 0. A buffer the user detached
// (`transfer()` of a result's view) has nothing left to detach: its memory
// went with it, and the shim, which counts the moved buffer, frees it only
// once that is gone. An uncounted one (no Node-API) is kept for good.
function unmap(block: Block): void {
  const cache = block.cache as PinnedCache | undefined;
  if (cache && !cache.buffer.detached) cache.buffer.transfer(0);
  else if (cache && !cache.counted) hostKeep(block.address, block.size);
  block.cache = undefined;
}

/** The pinned host memory pool. */
export const pinnedPool: BlockPool = new BlockPool({
  alloc: hostAlloc,
  free(block: Block): void {
    unmap(block);
    if (block.id !== undefined) blockFree(block.id);
    else hostFree(block.address);
  },
  unmap,
  // Our own unmap clears `cache`: a detached buffer still cached is one a
  // user transferred (`transfer()`, `postMessage`), and the memory went with it.
  escaped: (block: Block): boolean =>
    (block.cache as PinnedCache | undefined)?.buffer.detached === true,
}, {
  minBlockBytes: 64 * 1024,
  limitBytes: () => memoryLimits().pinnedBytes,
  onRelease: () => {
    // Memory parked behind a moved buffer that has died since is freed
    // here too: a steady loop makes no other pinned call. A failure there
    // (a broken context) is not this release's: the entries are taken.
    try {
      freeUnviewedPinned();
    } catch {
      // (see above)
    }
    memoryReleased();
  },
  shared: sharedCache(PINNED_KIND),
  frontBytes: PINNED_FRONT_BYTES,
});

function cacheOf(block: Block): PinnedCache {
  let cache = block.cache as PinnedCache | undefined;
  if (!cache) {
    const buffer = pinnedArrayBuffer(block.address, block.size);
    cache = { buffer, views: new Map(), byCode: [], counted: pinnedBuffersCounted() };
    block.cache = cache;
  }
  return cache;
}

/** The ArrayBuffer over a pinned block (created once per block). */
export function pinnedBuffer(block: Block): ArrayBuffer {
  return cacheOf(block).buffer;
}

/**
 * A table of whole-block views by class code, kept with the block (a walk
 * that packs into it fills the entries it needs from {@linkcode pinnedView}):
 * a copy that reuses a block finds its views without a table of its own.
 */
export function pinnedViewsByCode(block: Block): (TypedArray | undefined)[] {
  return cacheOf(block).byCode;
}

/** A whole-block view of class `cls` (cached per block and class). */
export function pinnedView(block: Block, cls: TypedArrayConstructor): TypedArray {
  const cache = cacheOf(block);
  let view = cache.views.get(cls);
  if (!view) {
    view = new cls(cache.buffer, 0, Math.floor(block.size / cls.BYTES_PER_ELEMENT));
    cache.views.set(cls, view);
  }
  return view;
}
