import assert from "node:assert/strict";
import { deviceAlloc } from "../../ffi/native.ts";
import { blockFree } from "../../ffi/process_cache.ts";
import { deviceCount } from "../../mod.ts";
import { BlockPool } from "../../src/memory/block_pool.ts";
import {
  devicesWithProcessMemory,
  processBytes,
  processCacheIdle,
  processStagers,
  requestFlush,
  sharedCache,
  trimProcessCaches,
} from "../../src/memory/process_cache.ts";
import { hasGpu } from "../gpu/_helpers.ts";

Deno.test({
  name:
    "without a usable device nothing is cached process-wide: every figure reads 0 and trimming frees nothing",
  ignore: deviceCount() > 0,
  fn() {
    for (const kind of [-1, 0, 3]) {
      const cache = sharedCache(kind);
      assert.equal(cache.flushEpoch, 0);
      assert.equal(cache.cachedBytes, 0);
      assert.equal(cache.processBytes, 0);
      assert.deepEqual(cache.trim(0), { freed: 0, nextMs: Infinity });
      assert.equal(processBytes(kind), 0);
    }
    assert.deepEqual(trimProcessCaches(0), { freed: 0, nextMs: Infinity });
    assert.equal(processCacheIdle(), false);
    assert.deepEqual(processStagers(), { stagers: 0, bytes: 0, idleBytes: 0 });
    assert.deepEqual(devicesWithProcessMemory(), []);
    requestFlush();
  },
});

Deno.test({
  name:
    "a block one pool gives to the process-wide cache is counted there and served to the next pool that asks",
  ignore: !hasGpu,
  fn() {
    const pool = () =>
      new BlockPool({
        alloc: (bytes) => deviceAlloc(0, bytes),
        free: (block) => blockFree(block.id!),
      }, { minBlockBytes: 512, shared: sharedCache(0), frontBytes: 0 });
    const first = pool();
    const second = pool();
    first.trim();
    const size = 3 << 20; // a size no other cached block has
    const block = first.acquire(size);
    const held = processBytes(0);
    assert.ok(held >= size);
    assert.ok(devicesWithProcessMemory().includes(0));
    const cached = sharedCache(0).cachedBytes;
    first.release(block);
    assert.equal(sharedCache(0).cachedBytes, cached + block.size);
    assert.equal(processCacheIdle(), true);
    const taken = second.acquire(size);
    assert.equal(taken.address, block.address);
    assert.equal(second.stats().hits, 1);
    assert.equal(sharedCache(0).cachedBytes, cached);
    second.release(taken);
    assert.ok(trimProcessCaches(0).freed >= block.size);
    assert.equal(sharedCache(0).cachedBytes, 0);
  },
});

Deno.test({
  name: "requestFlush() moves every pool's flush epoch, so each frees its front at its next use",
  ignore: !hasGpu,
  fn() {
    const before = sharedCache(-1).flushEpoch;
    requestFlush();
    assert.notEqual(sharedCache(-1).flushEpoch, before);
    assert.equal(sharedCache(0).flushEpoch, sharedCache(-1).flushEpoch);
  },
});
