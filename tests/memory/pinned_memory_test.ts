import assert from "node:assert/strict";
import {
  PINNED_FRONT_BYTES,
  pinnedBuffer,
  pinnedPool,
  pinnedView,
} from "../../src/memory/pinned_memory.ts";
import { hasGpu } from "../gpu/_helpers.ts";

// Pinned memory comes from CUDA (cuMemHostAlloc): the blocks need a GPU.

Deno.test("the pinned pool serves 64 KiB and up, and keeps 64 MiB of idle blocks with their views", () => {
  assert.equal(pinnedPool.sizeClass(1), 64 * 1024);
  assert.equal(pinnedPool.sizeClass(64 * 1024 + 1), 128 * 1024);
  assert.equal(PINNED_FRONT_BYTES, 64 * 1024 * 1024);
});

Deno.test({
  name: "a pinned block is mapped once: one buffer, and one whole-block view per class",
  ignore: !hasGpu,
  fn() {
    const block = pinnedPool.acquire(100_000);
    try {
      const buffer = pinnedBuffer(block);
      assert.equal(buffer.byteLength, block.size);
      assert.equal(pinnedBuffer(block), buffer);
      const floats = pinnedView(block, Float32Array);
      assert.equal(floats.buffer, buffer);
      assert.equal(floats.length, block.size / 4);
      assert.equal(pinnedView(block, Float32Array), floats);
      const bytes = pinnedView(block, Uint8Array);
      assert.notEqual(bytes as unknown, floats);
      floats[0] = 1;
      assert.deepEqual([...bytes.subarray(0, 4)], [0, 0, 128, 63]);
    } finally {
      pinnedPool.release(block);
    }
  },
});

Deno.test({
  name: "a released block keeps its views in the front; freeing it detaches them first",
  ignore: !hasGpu,
  fn() {
    pinnedPool.trimFront();
    const block = pinnedPool.acquire(70_000);
    const view = pinnedView(block, Float64Array);
    pinnedPool.release(block);
    assert.equal(view.length, block.size / 8);
    const again = pinnedPool.acquire(70_000);
    assert.equal(again, block);
    assert.equal(pinnedView(again, Float64Array), view);
    pinnedPool.release(again);
    pinnedPool.trimFront();
    // No JS view can reach memory that is freed or another isolate's.
    assert.equal(view.length, 0);
    assert.equal(block.cache, undefined);
  },
});
