import assert from "node:assert/strict";
import { deviceCount, setMemoryLimits } from "../../mod.ts";
import {
  DEVICE_FRONT_BYTES,
  devicePool,
  devicePoolIndices,
  devicePools,
  trimDevicePool,
} from "../../src/memory/device_memory.ts";
import { hasGpu } from "../gpu/_helpers.ts";

// Making a pool calls no CUDA (the allocator runs at the first miss), so the
// bookkeeping holds on every machine.

Deno.test("devicePool() makes one pool per device, on first use, and hands out the same one after", () => {
  const pool = devicePool(5);
  assert.equal(devicePool(5), pool);
  assert.notEqual(devicePool(6), pool);
});

Deno.test("devicePools() and devicePoolIndices() list the pools made so far, in device order, skipping the others", () => {
  devicePool(9);
  devicePool(7);
  const indices = devicePoolIndices();
  assert.ok(indices.includes(7) && indices.includes(9) && !indices.includes(8));
  assert.deepEqual(indices, [...indices].sort((a, b) => a - b));
  assert.deepEqual(devicePools(), indices.map((device) => devicePool(device)));
});

Deno.test("a device pool's limit is the device limit of setMemoryLimits, read when it matters", () => {
  const pool = devicePool(11);
  try {
    setMemoryLimits({ deviceBytes: 3 << 20 });
    assert.equal(pool.limitBytes, 3 << 20);
    setMemoryLimits({ deviceBytes: 5 << 20 });
    assert.equal(pool.limitBytes, 5 << 20);
  } finally {
    setMemoryLimits({ deviceBytes: Infinity });
  }
  assert.equal(pool.limitBytes, Infinity);
});

Deno.test("device blocks are served in sizes of 512 bytes and up, and the front keeps 64 MiB", () => {
  const pool = devicePool(12);
  assert.equal(pool.sizeClass(1), 512);
  assert.equal(pool.sizeClass(513), 1024);
  assert.equal(DEVICE_FRONT_BYTES, 64 * 1024 * 1024);
});

Deno.test({
  name: "without a usable device, trimming a device pool frees nothing and calls no CUDA",
  ignore: deviceCount() > 0,
  fn() {
    assert.equal(trimDevicePool(13), 0);
    assert.equal(devicePool(13).reservedBytes, 0);
  },
});

Deno.test({
  name:
    "a released device block stays in the pool's front and is reused; trimDevicePool() frees it",
  ignore: !hasGpu,
  fn() {
    const pool = devicePool(0);
    pool.trim();
    const block = pool.acquire(1000);
    assert.equal(block.size, 1024);
    pool.release(block);
    assert.equal(pool.frontBytes, 1024);
    const again = pool.acquire(900);
    assert.equal(again.address, block.address);
    pool.release(again);
    assert.ok(trimDevicePool(0) >= 1024);
    assert.equal(pool.frontBytes, 0);
  },
});
