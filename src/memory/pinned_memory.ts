/**
 * The process-wide pool of pinned (page-locked) host memory, and cached JS
 * views of its blocks.
 *
 * Each pinned block is mapped into JS once (`getArrayBuffer` costs about a
 * microsecond); typed views of it are cached per TypedArray class so that
 * staging a tensor is one `view.set(src, offset)`, a memcpy. When a block is
 * freed its ArrayBuffer is detached first, so no JS view can reach freed
 * memory.
 *
 * @module
 */

import { hostAlloc, hostArrayBuffer, hostFree } from "../../ffi/native.ts";
import { type Block, BlockPool } from "./block_pool.ts";
import { memoryLimits } from "./limits.ts";
import { memoryReleased } from "./released.ts";
import type { TypedArray, TypedArrayConstructor } from "../dtype.ts";

interface PinnedCache {
  buffer: ArrayBuffer;
  views: Map<unknown, TypedArray>;
}

/** The pinned host memory pool. */
export const pinnedPool: BlockPool = new BlockPool({
  alloc: hostAlloc,
  free(block: Block): void {
    const cache = block.cache as PinnedCache | undefined;
    // Detach before freeing: every view of the block becomes length 0.
    if (cache) cache.buffer.transfer(0);
    block.cache = undefined;
    hostFree(block.address);
  },
}, {
  minBlockBytes: 64 * 1024,
  limitBytes: () => memoryLimits().pinnedBytes,
  onRelease: memoryReleased,
});

function cacheOf(block: Block): PinnedCache {
  let cache = block.cache as PinnedCache | undefined;
  if (!cache) {
    cache = { buffer: hostArrayBuffer(block.address, block.size), views: new Map() };
    block.cache = cache;
  }
  return cache;
}

/** The ArrayBuffer over a pinned block (created once per block). */
export function pinnedBuffer(block: Block): ArrayBuffer {
  return cacheOf(block).buffer;
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
