/**
 * Run by tests/memory/pinned_memory_test.ts in a process of its own (what
 * it keeps, it keeps for good): a pinned block whose buffer is uncounted,
 * as where the runtime gives no Node-API, is moved by the user and given
 * back. Prints JSON: whether the pool served that block again, the moved
 * bytes after `releaseCachedMemory()`, and `movedAway`.
 */

import { hostArrayBuffer } from "../../ffi/native.ts";
import { memoryStats, releaseCachedMemory } from "../../mod.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";

const bytes = 4 * 1024 * 1024;
const block = pinnedPool.acquire(bytes);
// What cacheOf() makes where getHostView() gives nothing.
const buffer = hostArrayBuffer(block.address, block.size);
block.cache = { buffer, views: new Map(), counted: false };
new Uint8Array(buffer).fill(7);
const moved = new Uint8Array(buffer.transfer());
pinnedPool.release(block);
const again = [0, 1, 2].map(() => {
  const next = pinnedPool.acquire(bytes);
  pinnedPool.release(next);
  return next.address === block.address;
});
releaseCachedMemory();
const intact = moved.every((value) => value === 7);
const { movedAway, movedAwayBytes } = memoryStats().outsidePools;
console.log(JSON.stringify({ reused: again.includes(true), intact, movedAway, movedAwayBytes }));
