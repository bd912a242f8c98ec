import assert from "node:assert/strict";
import {
  PINNED_FRONT_BYTES,
  pinnedBuffer,
  pinnedPool,
  pinnedView,
  pinnedViewsByCode,
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

Deno.test({
  name:
    "a block's table of views by class code stays with the block while it is reused, and goes with its views",
  ignore: !hasGpu,
  fn() {
    pinnedPool.trimFront();
    const block = pinnedPool.acquire(70_000);
    const table = pinnedViewsByCode(block);
    table[0] = pinnedView(block, Float32Array); // as a packed walk fills it
    pinnedPool.release(block);
    const again = pinnedPool.acquire(70_000);
    assert.equal(again, block);
    assert.equal(pinnedViewsByCode(again), table);
    assert.equal(pinnedViewsByCode(again)[0], pinnedView(again, Float32Array));
    pinnedPool.release(again);
    pinnedPool.trimFront();
    // Freed: a block made later at any address starts with an empty table.
    const fresh = pinnedPool.acquire(70_000);
    assert.notEqual(pinnedViewsByCode(fresh), table);
    assert.equal(pinnedViewsByCode(fresh).length, 0);
    assert.equal(table[0]!.length, 0); // the old views are detached
    pinnedPool.release(fresh);
  },
});

Deno.test({
  name:
    "where buffers are uncounted (no Node-API), a block whose buffer the user moved is kept for good: never reused, never freed",
  ignore: !hasGpu,
  async fn() {
    // Without the shim's count, freeing the block at once unmapped the
    // moved buffer's memory (a crash on its next read); reusing it wrote
    // into it. In a process of its own: the memory stays taken.
    const fixture = new URL("./_uncounted_move.ts", import.meta.url).pathname;
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-ffi", "--allow-read", "--allow-env", fixture],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const why = new TextDecoder().decode(stderr);
    assert.equal(code, 0, why);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(stdout)), {
      reused: false,
      intact: true,
      movedAway: 1,
      movedAwayBytes: 4 * 1024 * 1024,
    });
  },
});
