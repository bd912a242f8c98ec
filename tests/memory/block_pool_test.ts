import assert from "node:assert/strict";
import { BlockPool } from "../../src/memory/block_pool.ts";
import type { Block, SharedBlockCache } from "../../src/memory/block_pool_types.ts";

/** A fake allocator: addresses from a counter, records frees. */
function fakeAllocator(failAbove = Infinity) {
  let next = 4096;
  const freed: number[] = [];
  const allocator = {
    alloc(bytes: number): number {
      if (bytes > failAbove) throw new Error("out of memory");
      const address = next;
      next += bytes;
      return address;
    },
    free(block: Block): void {
      freed.push(block.address);
    },
  };
  return { allocator, freed };
}

Deno.test("BlockPool.acquire() rounds up to a power of two and never gives less", () => {
  const pool = new BlockPool(fakeAllocator().allocator, { minBlockBytes: 512 });
  assert.equal(pool.acquire(1).size, 512);
  assert.equal(pool.acquire(513).size, 1024);
  assert.equal(pool.acquire(4096).size, 4096);
  const large = new BlockPool(fakeAllocator().allocator, { exactAboveBytes: 8192 });
  assert.equal(large.acquire(10_000).size, 10_000);
});

Deno.test("BlockPool.release() makes a block reusable without a new allocation", () => {
  const pool = new BlockPool(fakeAllocator().allocator);
  const block = pool.acquire(1000);
  pool.release(block);
  assert.equal(pool.acquire(900), block);
  assert.deepEqual(pool.stats(), {
    hits: 1,
    misses: 1,
    reservedBytes: 4096,
    inUseBytes: 4096,
    peakReservedBytes: 4096,
    limitBytes: Infinity,
    processBytes: 4096,
  });
});

Deno.test("BlockPool does not reuse a block of another size class", () => {
  const pool = new BlockPool(fakeAllocator().allocator);
  const small = pool.acquire(4096);
  pool.release(small);
  assert.notEqual(pool.acquire(8192), small);
});

Deno.test("BlockPool frees instead of caching past maxCachedBytes", () => {
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator, { maxCachedBytes: 4096 });
  const a = pool.acquire(4096);
  const b = pool.acquire(4096);
  pool.release(a);
  pool.release(b);
  assert.deepEqual(freed, [b.address]);
  assert.equal(pool.stats().reservedBytes, 4096);
});

Deno.test("BlockPool.trim() frees every idle block", () => {
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator);
  const blocks = [pool.acquire(10), pool.acquire(5000)];
  blocks.forEach((block) => pool.release(block));
  assert.equal(pool.trim(), 4096 + 8192);
  assert.equal(freed.length, 2);
  assert.deepEqual(pool.stats().reservedBytes, 0);
});

Deno.test("BlockPool retries an allocation once after trimming", () => {
  let live = 0;
  const pool = new BlockPool({
    alloc(bytes: number): number {
      if (live + bytes > 16384) throw new Error("out of memory");
      live += bytes;
      return live;
    },
    free(block: Block): void {
      live -= block.size;
    },
  });
  pool.release(pool.acquire(8192));
  pool.release(pool.acquire(4096));
  assert.equal(pool.acquire(16384).size, 16384);
  assert.equal(pool.stats().reservedBytes, 16384);
});

Deno.test("BlockPool.makeRoom() frees idle blocks in the way and says whether a request fits", () => {
  let limit = 16384;
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator, { minBlockBytes: 4096, limitBytes: () => limit });
  const held = pool.acquire(8192);
  pool.release(pool.acquire(4096));
  assert.equal(pool.cachedBytes, 4096);
  // 8192 in use + 8192 asked = the limit: fits once the idle 4096 are gone.
  assert.equal(pool.makeRoom(8192), true);
  assert.equal(pool.cachedBytes, 0);
  assert.equal(freed.length, 1);
  assert.equal(pool.makeRoom(8193), false);
  limit = Infinity;
  assert.equal(pool.makeRoom(1e12), true);
  pool.release(held);
});

Deno.test("BlockPool.release() frees instead of caching while the pool holds more than its limit", () => {
  let limit = Infinity;
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator, { minBlockBytes: 4096, limitBytes: () => limit });
  const a = pool.acquire(4096);
  const b = pool.acquire(4096);
  limit = 4096;
  pool.release(a);
  assert.deepEqual(freed, [a.address]);
  pool.release(b);
  assert.equal(pool.cachedBytes, 4096);
  assert.equal(pool.stats().limitBytes, 4096);
});

Deno.test("BlockPool.acquire() frees idle blocks of other sizes rather than exceed its limit", () => {
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator, { minBlockBytes: 4096, limitBytes: () => 8192 });
  const small = pool.acquire(4096);
  pool.release(small);
  pool.acquire(8192);
  assert.deepEqual(freed, [small.address]);
  assert.equal(pool.reservedBytes, 8192);
});

Deno.test("BlockPool raises onRelease after every release and counts its uses", () => {
  let releases = 0;
  const pool = new BlockPool(fakeAllocator().allocator, { onRelease: () => releases++ });
  assert.equal(pool.uses, 0);
  const block = pool.acquire(10);
  assert.equal(pool.uses, 1);
  pool.release(block);
  assert.equal(releases, 1);
  assert.equal(pool.uses, 2);
});

Deno.test("BlockPool.releaseAll() frees blocks in use too, and their later release is ignored", () => {
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator, { minBlockBytes: 4096 });
  const live = pool.acquire(4096);
  pool.release(pool.acquire(8192));
  assert.equal(pool.releaseAll(), 4096 + 8192);
  assert.equal(freed.length, 2);
  pool.release(live);
  assert.equal(freed.length, 2);
  assert.deepEqual([pool.reservedBytes, pool.inUseBytes, pool.cachedBytes], [0, 0, 0]);
});

/**
 * A fake process-wide cache that several pools (isolates) share: idle
 * blocks by size, the bytes every pool holds together, and flush requests.
 */
function fakeSharedCache() {
  const idle = new Map<number, Block[]>();
  let cachedBytes = 0;
  let heldBytes = 0;
  let epoch = 0;
  let nextId = 0;
  const freed: Block[] = [];
  const shared: SharedBlockCache = {
    get flushEpoch() {
      return epoch;
    },
    get cachedBytes() {
      return cachedBytes;
    },
    get processBytes() {
      return heldBytes;
    },
    take(size) {
      const block = idle.get(size)?.pop();
      if (block) cachedBytes -= size;
      return block;
    },
    adopt(address, size) {
      heldBytes += size;
      return { id: nextId++, address, size };
    },
    give(block, maxCachedBytes) {
      if (cachedBytes + block.size > maxCachedBytes) {
        heldBytes -= block.size;
        freed.push(block);
        return;
      }
      let list = idle.get(block.size);
      if (!list) idle.set(block.size, list = []);
      list.push(block);
      cachedBytes += block.size;
    },
    trim() {
      const bytes = cachedBytes;
      for (const list of idle.values()) freed.push(...list.splice(0));
      heldBytes -= bytes;
      cachedBytes = 0;
      return { freed: bytes, nextMs: Infinity };
    },
  };
  return { shared, freed, requestFlush: () => epoch++ };
}

/** An allocator that counts allocations and records which blocks were unmapped and freed. */
function countingAllocator() {
  const { allocator, freed } = fakeAllocator();
  const unmapped: Block[] = [];
  let allocations = 0;
  return {
    allocator: {
      alloc(bytes: number): number {
        allocations++;
        return allocator.alloc(bytes);
      },
      free: allocator.free,
      unmap(block: Block): void {
        unmapped.push(block);
        block.cache = undefined;
      },
    },
    freed,
    unmapped,
    allocations: () => allocations,
  };
}

Deno.test("BlockPool with a shared cache: a block one pool releases serves another pool without an allocation", () => {
  const { shared } = fakeSharedCache();
  const a = countingAllocator();
  const b = countingAllocator();
  const poolA = new BlockPool(a.allocator, { shared });
  const poolB = new BlockPool(b.allocator, { shared });
  const block = poolA.acquire(5000);
  block.cache = "views of isolate A";
  poolA.release(block);
  // It left A without A's views.
  assert.deepEqual(a.unmapped, [block]);
  assert.equal(block.cache, undefined);
  assert.equal(poolB.cachedBytes, 8192);
  assert.equal(poolB.acquire(8000), block);
  assert.equal(b.allocations(), 0);
  assert.deepEqual(poolB.stats().processBytes, 8192);
  assert.equal(poolA.inUseBytes, 0);
});

Deno.test("BlockPool keeps up to frontBytes idle for itself, views and all; the rest goes to the shared cache", () => {
  const { shared } = fakeSharedCache();
  const { allocator, unmapped } = countingAllocator();
  const pool = new BlockPool(allocator, { shared, frontBytes: 8192 });
  const kept = pool.acquire(8192);
  const given = pool.acquire(8192);
  kept.cache = "views";
  pool.release(kept);
  pool.release(given);
  assert.equal(kept.cache, "views");
  assert.deepEqual(unmapped, [given]);
  assert.equal(pool.frontBytes, 8192);
  assert.equal(shared.cachedBytes, 8192);
  assert.equal(pool.cachedBytes, 16384);
  // The front first: the same block, with its views.
  assert.equal(pool.acquire(8192), kept);
});

Deno.test("BlockPool frees its front at its next use once some isolate asked for a flush", () => {
  const { shared, requestFlush } = fakeSharedCache();
  const { allocator, freed } = countingAllocator();
  const pool = new BlockPool(allocator, { shared, frontBytes: 1 << 20 });
  const block = pool.acquire(4096);
  pool.release(block);
  assert.equal(pool.frontBytes, 4096);
  requestFlush();
  pool.acquire(100_000);
  assert.deepEqual(freed, [block.address]);
  assert.equal(pool.frontBytes, 0);
});

Deno.test("BlockPool.trim() frees its front and the shared cache; abandonAll() forgets without freeing", () => {
  const { shared } = fakeSharedCache();
  const { allocator, freed, unmapped } = countingAllocator();
  const pool = new BlockPool(allocator, { shared, frontBytes: 4096 });
  const blocks = [pool.acquire(4096), pool.acquire(4096), pool.acquire(4096)];
  pool.release(blocks[0]);
  pool.release(blocks[1]);
  assert.equal(pool.trim(), 8192);
  assert.deepEqual(freed, [blocks[0].address]);
  assert.equal(shared.cachedBytes, 0);
  pool.release(pool.acquire(4096));
  pool.abandonAll();
  assert.deepEqual(unmapped.length, 3);
  assert.deepEqual([pool.inUseBytes, pool.frontBytes], [0, 0]);
  pool.release(blocks[2]);
  assert.equal(pool.inUseBytes, 0);
  assert.equal(shared.cachedBytes, 0);
});

Deno.test("BlockPool never reuses a block its allocator says escaped (moved away by a user): freed on release, and when found idle in the front", () => {
  // Pinned blocks whose buffer a user transferred (src/memory/pinned_memory.ts):
  // reused, the next copy wrote into the moved buffer.
  const { shared } = fakeSharedCache();
  const { allocator, freed, unmapped } = countingAllocator();
  const escaped = new Set<Block>();
  const pool = new BlockPool(
    { ...allocator, escaped: (block: Block) => escaped.has(block) },
    { shared, frontBytes: 1 << 20 },
  );
  const moved = pool.acquire(4096);
  escaped.add(moved);
  pool.release(moved);
  assert.deepEqual(freed, [moved.address]);
  // Moved away after it came back idle: freed when its turn comes.
  const idle = pool.acquire(4096);
  assert.notEqual(idle, moved);
  pool.release(idle);
  escaped.add(idle);
  const next = pool.acquire(4096);
  assert.ok(next !== idle && next !== moved);
  assert.deepEqual(freed, [moved.address, idle.address]);
  assert.deepEqual(unmapped, []);
  assert.deepEqual([pool.inUseBytes, pool.frontBytes, pool.cachedBytes], [4096, 0, 0]);
});

Deno.test("makeRoom frees idle blocks only where that makes the room", () => {
  const { allocator, freed } = fakeAllocator();
  const pool = new BlockPool(allocator, { limitBytes: () => 200 * 1024 });
  pool.release(pool.acquire(110 * 1024)); // one idle 128 KiB block
  const allocations = pool.stats().misses;
  // 128 KiB idle + 110 KiB asked is past the limit, but the request takes the idle block.
  assert.equal(pool.makeRoom(110 * 1024), true);
  assert.equal(pool.cachedBytes, 128 * 1024);
  pool.release(pool.acquire(110 * 1024));
  assert.deepEqual([pool.stats().misses, freed.length], [allocations, 0]);
  // A request of another size still has the idle block freed to make room.
  assert.equal(pool.makeRoom(150 * 1024), true);
  assert.deepEqual([pool.cachedBytes, freed.length], [0, 1]);
  // A request that does not fit beside what is in use frees nothing: it could not help.
  pool.release(pool.acquire(110 * 1024));
  const held = pool.acquire(64 * 1024);
  assert.equal(pool.makeRoom(150 * 1024), false);
  assert.deepEqual([pool.cachedBytes, freed.length], [128 * 1024, 1]);
  pool.release(held);
});
