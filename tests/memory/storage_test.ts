import assert from "node:assert/strict";
import { BlockPool } from "../../src/memory/block_pool.ts";
import { Storage } from "../../src/memory/storage.ts";

function pool(): BlockPool {
  let next = 4096;
  return new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free() {} });
}

Deno.test("a Storage returns its block to the pool when its last hold is released", () => {
  const blocks = pool();
  const storage = new Storage(blocks, blocks.acquire(1000), 2);
  storage.retain();
  storage.release();
  storage.release();
  assert.equal(storage.released, false);
  assert.ok(blocks.stats().inUseBytes > 0);
  storage.release();
  assert.equal(storage.released, true);
  assert.equal(blocks.stats().inUseBytes, 0);
});

Deno.test("a released Storage cannot be held again", () => {
  const blocks = pool();
  const storage = new Storage(blocks, blocks.acquire(64), 1);
  storage.release();
  assert.throws(() => storage.retain(), /Cannot retain a released storage/);
});

Deno.test("a pending Storage holds nothing until attached, then holds its block for each bound tensor", () => {
  const blocks = pool();
  const storage = Storage.pending(blocks);
  assert.equal(storage.released, true, "no holds before attach");
  storage.release();
  assert.equal(blocks.stats().inUseBytes, 0);
  const block = blocks.acquire(256);
  storage.attach(block, 2);
  assert.equal(storage.block, block);
  assert.equal(storage.address, block.address);
  const refused = blocks.acquire(64);
  assert.throws(() => storage.attach(refused, 1), /Cannot attach a block to a bound storage/);
  storage.release();
  assert.equal(storage.released, false);
  storage.release();
  assert.equal(storage.released, true);
  assert.equal(blocks.stats().inUseBytes, refused.size, "only the refused block is still out");
});

Deno.test("a Storage drops many holds at once as as many releases would", () => {
  const blocks = pool();
  const storage = new Storage(blocks, blocks.acquire(1000), 5);
  storage.releaseHolds(0);
  storage.releaseHolds(3);
  assert.equal(storage.holds, 2);
  assert.ok(blocks.stats().inUseBytes > 0);
  storage.releaseHolds(4); // past the last hold: as release() past it, nothing more
  assert.equal(storage.released, true);
  assert.equal(blocks.stats().inUseBytes, 0);
  storage.releaseHolds(1);
  assert.equal(blocks.stats().inUseBytes, 0);
});

Deno.test("a Storage's disposals move with every disposed tensor's hold, and when a disposal starts", () => {
  const blocks = pool();
  const storage = new Storage(blocks, blocks.acquire(64), 4);
  const seen = storage.disposals;
  storage.retain();
  storage.release(); // a hold that is no tensor's (a copy's): no disposal
  assert.equal(storage.disposals, seen);
  storage.releaseDisposed();
  assert.equal(storage.disposals, seen + 1);
  storage.disposing(); // a batch starts: moves before its holds are dropped
  assert.equal(storage.disposals, seen + 2);
  storage.releaseHolds(2);
  assert.equal(storage.disposals, seen + 4);
  assert.equal(storage.holds, 1);
});
