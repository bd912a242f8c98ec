import assert from "node:assert/strict";
import { deviceCount, hostArena, memoryStats } from "../../mod.ts";
import { BlockPool } from "../../src/memory/block_pool.ts";
import { poolMemoryStats } from "../../src/memory/stats.ts";

Deno.test("a pool's figures: reserved is what it allocated and did not free, in use what it handed out, cached the rest", () => {
  // What the allocator was asked for and freed, counted apart from the pool's own counters.
  let allocated = 0;
  let next = 1 << 20;
  const pool = new BlockPool({
    alloc(bytes) {
      allocated += bytes;
      return (next += bytes + 4096) - bytes;
    },
    free(block) {
      allocated -= block.size;
    },
  }, { minBlockBytes: 4096 });
  const small = pool.acquire(4096);
  const middle = pool.acquire(8192);
  const large = pool.acquire(16384);
  pool.release(middle);
  assert.deepEqual(poolMemoryStats(pool.stats()), {
    reservedBytes: allocated,
    inUseBytes: small.size + large.size,
    cachedBytes: middle.size,
    processBytes: allocated,
    peakReservedBytes: 4096 + 8192 + 16384,
    allocations: 3,
    reuses: 0,
    limitBytes: Infinity,
  });
  assert.equal(allocated, 28672);

  const again = pool.acquire(8192); // served from the cache
  assert.equal(again, middle);
  pool.release(small);
  pool.trim(); // frees the small block
  assert.deepEqual(poolMemoryStats(pool.stats()), {
    reservedBytes: 8192 + 16384,
    inUseBytes: 8192 + 16384,
    cachedBytes: 0,
    processBytes: 8192 + 16384,
    peakReservedBytes: 28672,
    allocations: 3,
    reuses: 1,
    limitBytes: Infinity,
  });
  assert.equal(allocated, 8192 + 16384);
});

Deno.test("a pool's peak is the most it held at once, kept after a trim", () => {
  let next = 4096;
  const pool = new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free() {} });
  const a = pool.acquire(8192);
  const b = pool.acquire(8192);
  pool.release(a);
  pool.release(b);
  pool.trim();
  assert.equal(pool.stats().reservedBytes, 0);
  assert.equal(pool.stats().peakReservedBytes, 16384);
  pool.acquire(4096);
  assert.equal(pool.stats().peakReservedBytes, 16384);
});

Deno.test("memoryStats() counts pinned memory outside the pools apart: an ordinary-memory arena is not in it", async () => {
  const { deviceCount, hostArena } = await import("../../mod.ts");
  const before = memoryStats().outsidePools;
  const arena = hostArena(4096);
  const during = memoryStats().outsidePools;
  const pinned = deviceCount() > 0;
  assert.equal(during.arenas - before.arenas, pinned ? 1 : 0);
  assert.equal(during.arenaBytes - before.arenaBytes, pinned ? 4096 : 0);
  arena.dispose();
  // (`movedAway` may change meanwhile: a collection can end a moved buffer.)
  const after = memoryStats().outsidePools;
  assert.deepEqual([after.arenas, after.arenaBytes], [before.arenas, before.arenaBytes]);
});

Deno.test({
  name: "memoryStats().outsidePools.movedAway counts only pinned memory: none without a GPU",
  ignore: deviceCount() > 0, // on a GPU: tests/gpu/host_arena_test.ts and lifetime_test.ts
  fn() {
    const arena = hostArena(64);
    const moved = (arena.uint8(1).buffer as ArrayBuffer).transfer();
    arena.dispose();
    const { movedAway, movedAwayBytes } = memoryStats().outsidePools;
    assert.deepEqual([movedAway, movedAwayBytes, moved.byteLength], [0, 0, 64]);
  },
});
