import assert from "node:assert/strict";
import {
  disposeAll,
  MemoryLimitError,
  memoryStats,
  releaseCachedMemory,
  setMemoryLimits,
  startCopy,
  type Tensor,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { assertRoundTrip, hasGpu, randomArray } from "./_helpers.ts";

// The pools' limits: a copy that can never fit fails at once, one that fits
// once memory comes back waits for it (disposed or collected results, copies
// that settle), one that waits too long fails naming the limit; idle memory
// goes back after the idle time. Nothing leaks on any of these paths.

const gpu = { ignore: !hasGpu };
const MiB = 1024 * 1024;

async function withLimits(limits: Parameters<typeof setMemoryLimits>[0], fn: () => Promise<void>) {
  const before = setMemoryLimits({});
  try {
    setMemoryLimits(limits);
    await fn();
  } finally {
    setMemoryLimits(before);
  }
}

/** Collects garbage and lets finalizers run: results dropped by earlier tests go back first. */
async function settled(): Promise<void> {
  for (let i = 0; i < 2; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

Deno.test({
  ...gpu,
  name: "a copy larger than the device limit rejects get() at once, naming the limit",
  async fn() {
    const inUse = devicePool(0).inUseBytes;
    await withLimits({ deviceBytes: 4 * MiB }, async () => {
      const handle = startCopy([randomArray(Uint8Array, 8 * MiB, 1)], "cuda:0");
      await assert.rejects(handle.get(), (error) => {
        assert.ok(error instanceof MemoryLimitError);
        assert.equal(error.memory, "cuda:0");
        assert.equal(error.waitedMs, undefined);
        assert.match(
          error.message,
          /needs about \d+ bytes of cuda:0 memory, more than the memory limit/,
        );
        return true;
      });
      assert.equal(devicePool(0).inUseBytes, inUse);
    });
    const input = [randomArray(Float32Array, 1024, 2)];
    const output = await startCopy(input, "cuda:0").get();
    assertRoundTrip(input, await startCopy(output, "cpu").get(), "cpu");
    disposeAll(output);
  },
});

Deno.test({
  ...gpu,
  name: "a copy over the limit waits for results to be disposed, then completes bit-exact",
  async fn() {
    const base = devicePool(0).inUseBytes;
    await withLimits({ deviceBytes: base + 24 * MiB, waitMs: 10_000 }, async () => {
      const first = await startCopy([randomArray(Uint8Array, 16 * MiB, 3)], "cuda:0").get();
      const input = [randomArray(Uint8Array, 16 * MiB, 4)];
      const second = startCopy(input, "cuda:0");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(second.ready(), false, "the second copy must wait for memory");
      disposeAll(first);
      const output = await second.get();
      assertRoundTrip(input, await startCopy(output, "cpu").get(), "cpu");
      assert.ok(devicePool(0).reservedBytes <= base + 24 * MiB + devicePool(0).cachedBytes);
      disposeAll(output);
    });
    assert.equal(devicePool(0).inUseBytes, base);
  },
});

Deno.test({
  ...gpu,
  name: "copies queue behind a waiting copy and run once memory comes back",
  async fn() {
    const base = devicePool(0).inUseBytes;
    await withLimits({ deviceBytes: base + 8 * MiB, waitMs: 10_000 }, async () => {
      const held = await startCopy([new Uint8Array(6 * MiB)], "cuda:0").get();
      const big = startCopy([randomArray(Uint8Array, 4 * MiB, 5)], "cuda:0");
      const small = startCopy([randomArray(Uint8Array, 16, 6)], "cuda:0");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(big.ready(), false);
      assert.equal(small.ready(), false, "the small copy waits behind the big one");
      disposeAll(held);
      disposeAll(await Promise.all([big.get(), small.get()]));
    });
    assert.equal(devicePool(0).inUseBytes, base);
  },
});

Deno.test({
  ...gpu,
  name: "a copy that waits longer than waitMs rejects naming the limit and leaks nothing",
  async fn() {
    const base = devicePool(0).inUseBytes;
    await withLimits({ deviceBytes: base + 8 * MiB, waitMs: 50 }, async () => {
      const held = await startCopy([new Uint8Array(6 * MiB)], "cuda:0").get();
      const handle = startCopy({ x: new Uint8Array(4 * MiB) }, "cuda:0");
      await assert.rejects(handle.get(), (error) => {
        assert.ok(error instanceof MemoryLimitError);
        assert.equal(error.waitedMs, 50);
        assert.match(error.message, /waited 50 ms .* Dispose results you no longer need/);
        return true;
      });
      assert.equal(handle.ready(), true);
      disposeAll(held);
    });
    assert.equal(devicePool(0).inUseBytes, base);
  },
});

Deno.test({
  ...gpu,
  name: "CUDA→CPU copies wait under the pinned limit the same way",
  async fn() {
    const base = pinnedPool.inUseBytes;
    const onDevice = await startCopy([randomArray(Uint8Array, 4 * MiB, 7)], "cuda:0").get();
    await withLimits({ pinnedBytes: base + 6 * MiB, waitMs: 10_000 }, async () => {
      const first = await startCopy(onDevice, "cpu").get();
      const second = startCopy(onDevice, "cpu");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(second.ready(), false);
      const expected = (first[0] as Tensor).toTypedArray().slice();
      disposeAll(first);
      const back = await second.get();
      assert.deepEqual((back[0] as Tensor).toTypedArray(), expected);
      disposeAll(back);
    });
    disposeAll(onDevice);
    assert.equal(pinnedPool.inUseBytes, base);
  },
});

for (
  const [what, toDevice] of [
    ["a CUDA input of a CUDA→CPU copy waiting under the pinned limit", false],
    ["a pinned input of a CPU→CUDA copy waiting under the device limit", true],
  ] as const
) {
  Deno.test({
    ...gpu,
    name:
      `${what}, disposed while the copy waits, is held until it settles: the copy lands bit-exact, nothing leaks`,
    async fn() {
      const deviceBase = devicePool(0).inUseBytes;
      const pinnedBase = pinnedPool.inUseBytes;
      const source = [randomArray(Uint8Array, 4 * MiB, 8)];
      const onDevice = await startCopy(source, "cuda:0").get();
      // The input: on the device, or pinned (a CUDA→CPU result).
      const input = toDevice ? await startCopy(onDevice, "cpu").get() : onDevice;
      const limits = toDevice
        ? { deviceBytes: devicePool(0).inUseBytes + 6 * MiB, waitMs: 10_000 }
        : { pinnedBytes: pinnedPool.inUseBytes + 6 * MiB, waitMs: 10_000 };
      await withLimits(limits, async () => {
        // Memory that keeps the copy waiting until it is disposed.
        const first = await startCopy(
          toDevice ? [new Uint8Array(4 * MiB)] : onDevice,
          toDevice ? "cuda:0" : "cpu",
        ).get();
        const waiting = startCopy(input, toDevice ? "cuda:0" : "cpu");
        await new Promise((resolve) => setTimeout(resolve, 20));
        assert.equal(waiting.ready(), false, "the copy must wait for memory");
        disposeAll(input);
        assert.ok((input[0] as Tensor).disposed);
        disposeAll(first);
        const output = await waiting.get();
        const back = toDevice ? await startCopy(output, "cpu").get() : output;
        assertRoundTrip(source, back, "cpu");
        disposeAll([output, back]);
      });
      disposeAll(onDevice);
      assert.equal(devicePool(0).inUseBytes, deviceBase);
      assert.equal(pinnedPool.inUseBytes, pinnedBase);
    },
  });
}

Deno.test({
  ...gpu,
  name:
    "small CUDA inputs of two device blocks, disposed while their copy to the CPU waits, go back by runs bit-exact",
  async fn() {
    // Two results (two device blocks) of small tensors: the copy back goes
    // by runs, which read each leaf's storage and address as captured when
    // the copy started waiting (the tensors are disposed by then).
    const pinnedBase = pinnedPool.inUseBytes;
    const sources = [0, 1].map((r) =>
      Array.from({ length: 16 }, (_, i) => randomArray(Uint8Array, 128 * 1024, 40 + 16 * r + i))
    );
    const results: Tensor[][] = [];
    for (const source of sources) results.push(await startCopy(source, "cuda:0").get());
    const input = [...results[0], ...results[1]];
    await withLimits({ pinnedBytes: pinnedPool.inUseBytes + 6 * MiB, waitMs: 10_000 }, async () => {
      const first = await startCopy(input, "cpu").get(); // 4 MiB of pinned memory
      const waiting = startCopy(input, "cpu");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(waiting.ready(), false, "the copy must wait for memory");
      disposeAll(results);
      disposeAll(first);
      const back = await waiting.get();
      assertRoundTrip([...sources[0], ...sources[1]], back, "cpu");
      assert.equal(waiting.stats().chunks, 2); // one run per device block
      disposeAll(back);
    });
    assert.equal(pinnedPool.inUseBytes, pinnedBase);
  },
});

Deno.test({
  ...gpu,
  name: "a loop that drops its results stays under the device limit (finalizers give it back)",
  async fn() {
    const base = devicePool(0).inUseBytes;
    const limit = base + 64 * MiB;
    await withLimits({ deviceBytes: limit, waitMs: 20_000 }, async () => {
      const input = [randomArray(Uint8Array, 4 * MiB, 8)];
      let peak = 0;
      for (let i = 0; i < 200; i++) {
        await startCopy(input, "cuda:0").get(); // dropped
        peak = Math.max(peak, devicePool(0).inUseBytes);
      }
      assert.ok(peak <= limit, `in use peaked at ${peak}, limit ${limit}`);
    });
  },
});

Deno.test({
  ...gpu,
  name: "idle memory goes back after idleReleaseMs; memoryStats() shows it per pool",
  async fn() {
    await withLimits({ idleReleaseMs: 50 }, async () => {
      const output = await startCopy([new Float32Array(1 << 20)], "cuda:0").get();
      const during = memoryStats();
      const device = during.devices["cuda:0"];
      assert.ok(device.inUseBytes >= 4 * MiB);
      assert.equal(device.reservedBytes, device.inUseBytes + device.cachedBytes);
      assert.equal(device.limitBytes, during.limits.deviceBytes);
      assert.equal(during.limits.idleReleaseMs, 50);
      disposeAll(output);
      assert.ok(memoryStats().devices["cuda:0"].cachedBytes >= 4 * MiB);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const after = memoryStats();
      assert.equal(after.devices["cuda:0"].cachedBytes, 0);
      assert.equal(after.pinned.cachedBytes, 0);
      // The 4 MiB input was staged in the background: its stager's slots go back too.
      assert.equal(after.outsidePools.stagers, 0);
    });
  },
});

Deno.test({
  ...gpu,
  name:
    "releaseCachedMemory() also frees the idle background stagers' pinned slots, and counts them",
  async fn() {
    const output = await startCopy([new Uint8Array(8 * MiB)], "cuda:0").get();
    disposeAll(output);
    const before = memoryStats();
    assert.ok(before.outsidePools.stagers >= 1, "the 8 MiB input was staged in the background");
    const cached = before.pinned.cachedBytes + before.devices["cuda:0"].cachedBytes;
    const freed = releaseCachedMemory();
    const after = memoryStats();
    assert.equal(after.outsidePools.stagers, 0);
    assert.equal(after.outsidePools.stagingBytes, 0);
    assert.equal(freed, cached + before.outsidePools.stagingBytes);
    // A later large copy creates its stagers again.
    const again = [randomArray(Uint8Array, 8 * MiB, 9)];
    const onDevice = await startCopy(again, "cuda:0").get();
    const back = await startCopy(onDevice, "cpu").get();
    assertRoundTrip(again, back, "cpu");
    disposeAll([onDevice, back]);
  },
});

Deno.test({
  ...gpu,
  name:
    "a copy waiting for memory asks for a garbage collection rarely, not at every poll, and wakes when memory is released",
  async fn() {
    await settled();
    const base = devicePool(0).inUseBytes;
    const gc = (globalThis as { gc?: () => void }).gc;
    assert.ok(gc, "run with --v8-flags=--expose-gc");
    let collections = 0;
    await withLimits({ deviceBytes: base + 8 * MiB, waitMs: 1000 }, async () => {
      const held = await startCopy([new Uint8Array(6 * MiB)], "cuda:0").get();
      (globalThis as { gc?: () => void }).gc = () => {
        collections++;
        gc();
      };
      try {
        // Waits the whole second: nothing is released.
        await assert.rejects(
          startCopy([new Uint8Array(4 * MiB)], "cuda:0").get(),
          MemoryLimitError,
        );
      } finally {
        (globalThis as { gc?: () => void }).gc = gc;
      }
      // Polled every millisecond with a collection each time, this was one collection a poll
      // (about 35 in a second: each took most of the millisecond's wait and more).
      assert.ok(collections <= 10, `${collections} collections while one copy waited 1 s`);
      const waiting = startCopy([randomArray(Uint8Array, 4 * MiB, 10)], "cuda:0");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(waiting.ready(), false);
      disposeAll(held);
      disposeAll(await waiting.get());
    });
    assert.equal(devicePool(0).inUseBytes, base);
  },
});

Deno.test({
  ...gpu,
  name: "a waiting copy rejects at once when a limit is lowered below its need",
  async fn() {
    await settled();
    const base = devicePool(0).inUseBytes;
    await withLimits({ deviceBytes: base + 8 * MiB, waitMs: 30_000 }, async () => {
      const held = await startCopy([new Uint8Array(6 * MiB)], "cuda:0").get();
      try {
        const waiting = startCopy([new Uint8Array(4 * MiB)], "cuda:0");
        await new Promise((resolve) => setTimeout(resolve, 20));
        assert.equal(waiting.ready(), false, "the copy must wait for memory");
        setMemoryLimits({ deviceBytes: 2 * MiB });
        // Not after waitMs: the copy can never fit any more.
        await assert.rejects(waiting.get(), (error) => {
          assert.ok(error instanceof MemoryLimitError);
          assert.equal(error.waitedMs, undefined);
          assert.equal(error.limitBytes, 2 * MiB);
          return true;
        });
      } finally {
        disposeAll(held);
      }
    });
    assert.equal(devicePool(0).inUseBytes, base);
  },
});
