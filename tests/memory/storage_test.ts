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
