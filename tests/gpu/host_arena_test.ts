import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  disposeAll,
  hostArena,
  loadModule,
  MemoryLimitError,
  memoryStats,
  setMemoryLimits,
  startCopy,
  Tensor,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { unviewedPinnedBytes } from "../../src/memory/process_cache.ts";
import { collectUntil } from "../_helpers.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import {
  assertRoundTrip,
  bytesOf,
  hasGpu,
  HOLD_US,
  ptrAddress,
  randomArray,
  stepKernelsPtx,
} from "./_helpers.ts";

// Tensors built in a host arena go to the GPU from where they lie: one DMA
// per run of neighbours, no staging, no packing copy; the arena cannot be
// reset or freed while a copy reads it.

const gpu = { ignore: !hasGpu };

Deno.test({
  ...gpu,
  name: "a batch built in an arena lands bit-exact with one DMA and no staging",
  async fn() {
    using arena = hostArena(1 << 20);
    const batch = createBatchMetaData(16, 1, arena);
    const pinnedBefore = pinnedPool.stats();
    const before = testAids!.counters();
    const handle = startCopy(batch, "cuda:0");
    const onDevice = await handle.get();
    const after = testAids!.counters();
    assert.equal(after.copies - before.copies, 1, "one DMA for the whole batch");
    assert.equal(handle.stats().copies, 1);
    assert.equal(handle.stats().chunks, 1);
    assert.equal(handle.stats().packedTensors, 528);
    assert.equal(
      pinnedPool.stats().hits + pinnedPool.stats().misses,
      pinnedBefore.hits + pinnedBefore.misses,
      "no staging",
    );
    assertRoundTrip(batch, onDevice, "cuda:0");
    disposeAll(onDevice);
  },
});

Deno.test({
  ...gpu,
  name: "raw arena views and ordinary arrays mix in one copy, each bit-exact and aligned",
  async fn() {
    using arena = hostArena(1 << 16);
    const a = arena.float32(5);
    a.set(randomArray(Float32Array, 5, 1));
    const b = arena.uint8(3);
    b.set([1, 2, 3]);
    const c = arena.int64(2);
    c.set([-1n, 2n ** 62n]);
    const plain = randomArray(Float64Array, 7, 2);
    const input = { a, b, nested: [c, plain] };
    const onDevice = await startCopy(input, "cuda:0").get();
    assertRoundTrip(input, onDevice, "cuda:0");
    for (const t of [onDevice.a, onDevice.b, onDevice.nested[0]]) {
      assert.equal(ptrAddress(t) % 16, 0);
    }
    disposeAll(onDevice);
  },
});

Deno.test({
  ...gpu,
  name: "arena views far apart, out of order or overlapping go in separate runs",
  async fn() {
    using arena = hostArena(1 << 20);
    const first = arena.float32(4);
    arena.uint8(64 * 1024); // a gap wider than a run may carry
    const far = arena.float32(4);
    first.set([1, 2, 3, 4]);
    far.set([5, 6, 7, 8]);
    const overlap = new Float32Array(first.buffer, first.byteOffset + 4, 2);
    const input = [far, first, overlap];
    const handle = startCopy(input, "cuda:0");
    const onDevice = await handle.get();
    assertRoundTrip(input, onDevice, "cuda:0");
    assert.equal(handle.stats().copies, 3);
    disposeAll(onDevice);
  },
});

Deno.test({
  ...gpu,
  name: "reset() and dispose() throw while a copy reads the arena, and work once it settled",
  async fn() {
    const arena = hostArena(1 << 16);
    const boxes = arena.float32(16);
    boxes.fill(3);
    testAids!.delayStream(0, 100_000);
    const handle = startCopy({ boxes }, "cuda:0");
    assert.equal(arena.copiesInFlight, 1);
    assert.throws(() => arena.reset(), /Cannot reset a hostArena that 1 copies in flight/);
    assert.throws(() => arena.dispose(), /Cannot dispose a hostArena that 1 copies in flight/);
    const onDevice = await handle.get();
    assert.equal(arena.copiesInFlight, 0);
    arena.reset();
    assertRoundTrip({ boxes: new Float32Array(16).fill(3) }, onDevice, "cuda:0");
    disposeAll(onDevice);
    arena.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "an arena cannot be reset or freed while a copy from it waits for memory; the copy lands bit-exact",
  async fn() {
    const MiB = 1024 * 1024;
    const before = setMemoryLimits({});
    const arena = hostArena(1 << 16);
    try {
      const boxes = arena.float32(16);
      boxes.set(randomArray(Float32Array, 16, 4));
      const expected = { boxes: boxes.slice(), ids: new Int32Array([7, 8]) };
      const ids = arena.int32(2);
      ids.set([7, 8]);
      setMemoryLimits({ deviceBytes: devicePool(0).inUseBytes + 4 * MiB, waitMs: 10_000 });
      // Leaves less room than the 72 bytes the copy needs.
      const held = await startCopy([new Uint8Array(4 * MiB - 64)], "cuda:0").get();
      const handle = startCopy({ boxes, ids }, "cuda:0");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(handle.ready(), false, "the copy must wait for memory");
      assert.equal(arena.copiesInFlight, 1);
      assert.throws(() => arena.reset(), /Cannot reset a hostArena that 1 copies in flight/);
      assert.throws(() => arena.dispose(), /Cannot dispose a hostArena that 1 copies in flight/);
      disposeAll(held);
      const onDevice = await handle.get();
      assert.equal(arena.copiesInFlight, 0);
      assertRoundTrip(expected, onDevice, "cuda:0");
      disposeAll(onDevice);
    } finally {
      setMemoryLimits(before);
      arena.dispose();
    }
  },
});

Deno.test({
  ...gpu,
  name: "a copy from an arena that waited too long for memory releases its hold",
  async fn() {
    const MiB = 1024 * 1024;
    const before = setMemoryLimits({});
    using arena = hostArena(1 << 16);
    try {
      setMemoryLimits({ deviceBytes: devicePool(0).inUseBytes + 4 * MiB, waitMs: 50 });
      const held = await startCopy([new Uint8Array(4 * MiB - 16)], "cuda:0").get();
      try {
        await assert.rejects(
          startCopy([arena.float32(4), arena.int32(4)], "cuda:0").get(),
          MemoryLimitError,
        );
      } finally {
        disposeAll(held);
      }
    } finally {
      setMemoryLimits(before);
    }
    assert.equal(arena.copiesInFlight, 0);
    arena.reset();
  },
});

Deno.test({
  ...gpu,
  name: "a failed copy from an arena releases its hold",
  async fn() {
    using arena = hostArena(1 << 16);
    const boxes = arena.float32(16);
    testAids!.injectFault("copy", { error: 719 });
    try {
      await assert.rejects(startCopy([boxes, arena.int32(4)], "cuda:0").get());
    } finally {
      testAids!.injectFault("off");
    }
    assert.equal(arena.copiesInFlight, 0);
    arena.reset();
  },
});

Deno.test({
  ...gpu,
  name: "memoryStats() shows arenas and background stagers outside the pools, and their release",
  async fn() {
    const { memoryStats } = await import("../../mod.ts");
    const { releaseIdleStagers } = await import("../../src/memory/stager_pool.ts");
    releaseIdleStagers();
    const before = memoryStats().outsidePools;
    assert.equal(before.stagers, 0);
    const arena = hostArena(3 << 20);
    assert.equal(memoryStats().outsidePools.arenaBytes - before.arenaBytes, 3 << 20);
    // Large pageable tensors are staged in the background, by stagers that stay for the next copy.
    const large = Array.from({ length: 4 }, (_, i) => randomArray(Float32Array, 2 << 20, 40 + i));
    disposeAll(await startCopy(large, "cuda:0").get());
    const staged = memoryStats().outsidePools;
    assert.ok(staged.stagers >= 1, `${staged.stagers} stagers`);
    assert.equal(staged.stagingBytes % staged.stagers, 0);
    arena.dispose();
    releaseIdleStagers();
    assert.deepEqual(memoryStats().outsidePools, before);
  },
});

Deno.test({
  ...gpu,
  name:
    "arena leaves sent in one run keep the packed alignment of any minPackedAlignmentBytes on the device, not only those 256 is a multiple of",
  async fn() {
    // Views 48 (or 96) bytes apart join one run; the run's block started
    // at a multiple of 256 only, so every output lay at 32 mod 48.
    for (const min of [48, 96, 1024]) {
      using arena = hostArena(1 << 16);
      const leaves = Array.from({ length: 4 }, (_, i) => arena.uint8(min).fill(i + 1));
      const handle = startCopy(leaves, "cuda:0", { minPackedAlignmentBytes: min });
      const out = await handle.get();
      assert.equal(handle.stats().packedTensors, 4, `${min}: one run of four`);
      for (const tensor of out) assert.equal(ptrAddress(tensor) % min, 0, `${min}`);
      const back = await startCopy(out, "cpu").get();
      back.forEach((tensor, i) => assert.deepEqual(bytesOf(tensor), bytesOf(leaves[i])));
      disposeAll([out, back]);
    }
  },
});

Deno.test({
  ...gpu,
  name:
    "an arena dropped with its views while dispose({ after }) of a tensor over it waits for GPU work keeps its memory until that work is done",
  async fn() {
    // The hold counted, but nothing kept the arena's buffer reachable: its
    // finalizer freed the pinned memory while the work could still read it.
    const gc = (globalThis as { gc?: () => void }).gc;
    assert.ok(gc !== undefined, "the tests run with --expose-gc");
    const module = await loadModule(await stepKernelsPtx());
    const spin = module.kernel("spin_ns", ["u64"]);
    const before = memoryStats().outsidePools.arenas;
    const stream = createStream("cuda:0");
    const work = spin.launch({ grid: 1, block: 1, args: [BigInt(HOLD_US * 1000)], stream });
    (() => {
      const arena = hostArena(4096);
      Tensor.from(arena.float32(4)).dispose({ after: work });
    })();
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    // (Freeing pinned memory waits for the GPU: without the hold, the
    // finalizer's free also ended the wait for the spin.)
    assert.equal(memoryStats().outsidePools.arenas, before + 1, "held while the work runs");
    assert.equal(work.ready(), false, "the spin outlasts this check");
    await work.done();
    stream.dispose();
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "an arena whose buffer was transferred away, then disposed or dropped: the moved buffer keeps its memory and bytes until it is gone",
  async fn() {
    // dispose() and the finalizer freed the pinned memory under the moved
    // buffer: reading it crashed, or the next arena's bytes showed in it.
    const stats = () => memoryStats().outsidePools;
    await collectUntil(() => !(stats().movedAway > 0), "freeing earlier moved memory");
    const bytes = 1 << 20;
    const expected = randomArray(Uint8Array, bytes, 5);
    for (const end of ["dispose", "drop"]) {
      const arenasBefore = stats().arenas;
      let kept: Uint8Array | undefined = (() => {
        const arena = hostArena(bytes);
        arena.uint8(bytes).set(expected);
        const moved = new Uint8Array((arena.uint8(0).buffer as ArrayBuffer).transfer());
        if (end === "dispose") arena.dispose();
        return moved;
      })();
      await collectUntil(() => stats().arenas === arenasBefore, `the ${end}ped arena's release`);
      for (let i = 0; i < 3; i++) {
        using other = hostArena(bytes);
        other.uint8(bytes).fill(0xff);
      }
      const differs = kept.findIndex((value, i) => value !== expected[i]);
      assert.equal(differs, -1, `${end}: byte ${differs} of the moved buffer changed`);
      // Given up by dispose() while moved: counted. Dropped: its memory was
      // its buffers' from birth, and nothing tells a moved one from the last.
      const counted = end === "dispose" ? [1, bytes] : [0, 0];
      assert.deepEqual([stats().movedAway, stats().movedAwayBytes], counted, end);
      const address = Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(kept)));
      kept = undefined;
      // (memoryStats() frees what waits to be, as the next pinned call would.)
      await collectUntil(
        () => stats().movedAway === 0 && testAids!.hostViews(address) === 0,
        `${end}: the moved buffer's end`,
      );
      stats();
      assert.equal(unviewedPinnedBytes(), 0, `${end}: its memory freed`);
    }
  },
});
