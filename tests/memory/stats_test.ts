import assert from "node:assert/strict";
import { memoryStats } from "../../mod.ts";
import { BlockPool } from "../../src/memory/block_pool.ts";

Deno.test("memoryStats() reports each pool's bytes: reserved is in use plus cached", () => {
  const { pinned, devices } = memoryStats();
  assert.equal(pinned.reservedBytes, pinned.inUseBytes + pinned.cachedBytes);
  assert.ok(pinned.peakReservedBytes >= pinned.reservedBytes);
  for (const pool of Object.values(devices)) {
    assert.equal(pool.reservedBytes, pool.inUseBytes + pool.cachedBytes);
  }
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
  assert.deepEqual(memoryStats().outsidePools, before);
});
