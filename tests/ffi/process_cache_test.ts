import assert from "node:assert/strict";
import {
  blockAdopt,
  blockFree,
  blockGive,
  blockTake,
  cacheCounters,
  cacheTrim,
} from "../../ffi/process_cache.ts";

// The shim's process-wide cache, bookkeeping only: made-up addresses of a
// device index no machine has (the shim tracks 64), so that nothing here
// ever touches real memory, on machines with or without a GPU. Every test
// leaves the cache of that kind empty.
const KIND = 63;
const cached = (kind = KIND) => cacheCounters()[4 + 2 * (kind + 1)];
const held = (kind = KIND) => cacheCounters()[5 + 2 * (kind + 1)];
// Freeing memory of a device that does not exist fails (no device, or no
// driver at all), and the block is gone from the books all the same.
const FREE_FAILS = /MTC_ERROR_(BAD_DEVICE|NO_DRIVER)/;

Deno.test("the process-wide cache hands a given-back block to the next taker of its size, and counts its bytes", () => {
  const block = blockAdopt(KIND, 0x1000_0000, 8192);
  assert.equal(held(), 8192);
  assert.equal(blockTake(KIND, 8192), undefined, "nothing is idle yet");
  blockGive(block.id, Infinity);
  assert.deepEqual([cached(), held()], [8192, 8192]);
  assert.equal(blockTake(KIND, 4096), undefined, "never a block of another size");
  assert.deepEqual(blockTake(KIND, 8192), { id: block.id, address: 0x1000_0000, size: 8192 });
  assert.equal(cached(), 0);
  assert.throws(() => blockFree(block.id), FREE_FAILS);
  assert.equal(held(), 0);
});

Deno.test("the process-wide cache frees a given-back block instead of caching it past the cap", () => {
  const blocks = [blockAdopt(KIND, 0x2000_0000, 4096), blockAdopt(KIND, 0x3000_0000, 4096)];
  blockGive(blocks[0].id, 4096);
  assert.throws(() => blockGive(blocks[1].id, 4096), FREE_FAILS);
  assert.deepEqual([cached(), held()], [4096, 4096]);
  assert.throws(() => cacheTrim(KIND, 0), FREE_FAILS);
  assert.deepEqual([cached(), held()], [0, 0]);
});

Deno.test("what a Worker holds when it is terminated comes back to the process-wide cache", async () => {
  // A kind of its own: no cap was named for it yet.
  const kind = KIND - 1;
  const worker = new Worker(new URL("./_process_cache_worker.ts", import.meta.url), {
    type: "module",
  });
  try {
    const id = await new Promise((resolve, reject) => {
      worker.onmessage = (event) => resolve(event.data);
      worker.onerror = (event) => {
        event.preventDefault();
        reject(new Error(event.message));
      };
      worker.postMessage({ kind, size: 16384 });
    });
    assert.deepEqual([cached(kind), held(kind)], [0, 16384]);
    worker.terminate();
    // The Worker's thread ends a little after terminate() returns.
    const deadline = performance.now() + 10_000;
    while (cached(kind) !== 16384 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal(cached(kind), 16384, "the ended Worker's block is idle for every isolate");
    const block = blockTake(kind, 16384);
    assert.equal(block?.id, id);
    assert.throws(() => blockFree(block!.id), FREE_FAILS);
    assert.deepEqual([cached(kind), held(kind)], [0, 0]);
  } finally {
    worker.terminate();
  }
});
