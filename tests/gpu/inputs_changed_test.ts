import assert from "node:assert/strict";
import { disposeAll, setMemoryLimits, startCopy, Tensor } from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { JOB_BYTES } from "../../src/staging/background.ts";
import { packedWalkCounts } from "../../src/packed_walk.ts";
import { useCompiledWalks } from "../../src/walk/plan_cache.ts";
import { bytesOf, hasGpu, randomArray } from "./_helpers.ts";

const gpu = { ignore: !hasGpu };

/**
 * Runs `body` with the generic walk only: its leaves are staged after the
 * walk, which is what the tests below change inputs around. (A compiled
 * walk may pack small leaves as it reads them: later changes then cannot
 * reach the copy; see the last tests.)
 */
async function stagedAfterTheWalk(body: () => Promise<void>): Promise<void> {
  useCompiledWalks(false);
  try {
    await body();
  } finally {
    useCompiledWalks(true);
  }
}

Deno.test({
  ...gpu,
  name:
    "a large input of one staging job detached right after startCopy() returns still lands with its bytes (its memory is held)",
  async fn() {
    // 8 MiB: one background job, which starts before startCopy() returns
    // (later jobs start once the caller yields; see the next test).
    const input = randomArray(Float32Array, JOB_BYTES / 4, 101);
    const expected = bytesOf(input);
    const handle = startCopy([input], "cuda:0");
    input.buffer.transfer(8); // frees the old memory in a naive implementation
    const [onDevice] = await handle.get();
    assert.deepEqual(bytesOf(onDevice), expected);
    disposeAll(onDevice);
  },
});

Deno.test({
  ...gpu,
  name:
    "many large inputs detached mid-copy: get() rejects with an error naming the cause, nothing leaks, the process lives",
  async fn() {
    const deviceInUse = devicePool(0).stats().inUseBytes;
    const pinnedInUse = pinnedPool.stats().inUseBytes;
    const inputs = Array.from({ length: 24 }, (_, i) => randomArray(Uint8Array, 8 << 20, 200 + i));
    const handle = startCopy(inputs, "cuda:0");
    for (const input of inputs) input.buffer.transfer(16);
    const outcome = await handle.get().then(
      (result) => {
        disposeAll(result);
        return "resolved";
      },
      (error: Error) => error.message,
    );
    // The first job holds its source; later ones may find theirs detached.
    if (outcome !== "resolved") assert.match(outcome, /buffer was detached during the copy/);
    assert.equal(devicePool(0).stats().inUseBytes, deviceInUse);
    assert.equal(pinnedPool.stats().inUseBytes, pinnedInUse);
    const again = await startCopy([randomArray(Float32Array, 300_000, 7)], "cuda:0").get();
    disposeAll(again);
  },
});

Deno.test({
  ...gpu,
  name:
    "a large input over a resizable buffer shrunk right after startCopy() lands with the bytes it had",
  async fn() {
    const buffer = new ArrayBuffer(16 << 20, { maxByteLength: 32 << 20 });
    const input = new Float32Array(buffer, 0, 4 << 20); // fixed length: 16 MiB
    input.set(randomArray(Float32Array, 4 << 20, 301));
    const expected = bytesOf(input);
    const handle = startCopy([input], "cuda:0");
    buffer.resize(16);
    const [onDevice] = await handle.get();
    assert.deepEqual(bytesOf(onDevice), expected);
    disposeAll(onDevice);
  },
});

for (
  const [what, count] of [
    ["1000 × 4 KB (packed by several threads)", 1000],
    ["10 × 4 KB (packed on the main thread)", 10],
  ] as const
) {
  Deno.test({
    ...gpu,
    name:
      `inputs of ${what} detached while their copy waits for memory: get() rejects naming the cause, nothing leaks`,
    async fn() {
      const MiB = 1024 * 1024;
      const deviceInUse = devicePool(0).inUseBytes;
      const pinnedInUse = pinnedPool.stats().inUseBytes;
      const limits = setMemoryLimits({});
      try {
        setMemoryLimits({ deviceBytes: deviceInUse + 16 * MiB, waitMs: 10_000 });
        const first = await startCopy([randomArray(Uint8Array, 16 * MiB, 3)], "cuda:0").get();
        const inputs = Array.from({ length: count }, (_, i) => randomArray(Float32Array, 1024, i));
        await stagedAfterTheWalk(async () => {
          const handle = startCopy(inputs, "cuda:0");
          await new Promise((resolve) => setTimeout(resolve, 20));
          assert.equal(handle.ready(), false, "the copy must wait for memory");
          for (const input of inputs) input.buffer.transfer(0);
          disposeAll(first);
          await assert.rejects(handle.get(), /detached/);
        });
      } finally {
        setMemoryLimits(limits);
      }
      assert.equal(devicePool(0).inUseBytes, deviceInUse);
      assert.equal(pinnedPool.stats().inUseBytes, pinnedInUse);
    },
  });
}

for (
  const [what, length, options] of [
    ["packed, with pinned staging", 16, {}],
    ["packed, without pinned staging", 16, { usePinnedStaging: false }],
    ["alone, with pinned staging", 100_000, {}],
    ["alone, without pinned staging", 100_000, { usePinnedStaging: false }],
  ] as const
) {
  for (const change of ["grows", "shrinks"] as const) {
    Deno.test({
      ...gpu,
      name:
        `a leaf over a resizable buffer that ${change} during the walk (${what}): the copy fails naming the cause, nothing leaks`,
      async fn() {
        const deviceInUse = devicePool(0).inUseBytes;
        const pinnedInUse = pinnedPool.stats().inUseBytes;
        const bytes = 4 * length;
        const buffer = new ArrayBuffer(bytes, { maxByteLength: 4 * bytes });
        const tracking = new Float32Array(buffer); // tracks the buffer's length
        const input = [
          tracking,
          new Float32Array(length).fill(3),
          // A getter the walk reads after the leaf: the leaf's view changes
          // size between the walk and the staging of its bytes. Grown
          // (without pinned staging, alone) it was copied whole into a
          // device block of its old size, past the block's end.
          {
            get resize() {
              buffer.resize(change === "grows" ? 2 * bytes : bytes / 2);
              return 0;
            },
          },
        ];
        await stagedAfterTheWalk(() =>
          assert.rejects(
            (async () => disposeAll(await startCopy(input, "cuda:0", options).get()))(),
            new RegExp(
              `Cannot copy a tensor of ${bytes} bytes whose buffer was detached or resized during the copy \\(now ${buffer.byteLength} bytes\\)`,
            ),
          )
        );
        assert.equal(devicePool(0).inUseBytes, deviceInUse);
        assert.equal(pinnedPool.stats().inUseBytes, pinnedInUse);
      },
    });
  }
}

for (const options of [{}, { usePinnedStaging: false }]) {
  Deno.test({
    ...gpu,
    name: `a leaf resized during the walk of a copy into an earlier result (${
      JSON.stringify(options)
    }): the copy is refused naming the leaf, and the result keeps its bytes`,
    async fn() {
      const buffer = new ArrayBuffer(64, { maxByteLength: 256 });
      const tracking = new Float32Array(buffer).fill(1); // tracks the buffer's length
      let resize = false;
      const input = [
        tracking,
        new Float32Array(16).fill(2),
        {
          get resize() {
            if (resize) buffer.resize(128);
            return 0;
          },
        },
      ];
      const previous = await startCopy(input, "cuda:0").get();
      resize = true;
      tracking.fill(5);
      // Refused by the check of the data against the result (which reads
      // every value before it reads a leaf's size), or by staging.
      await assert.rejects(
        async () => await startCopy(input, "cuda:0", { ...options, into: previous }).get(),
        (error: Error) =>
          error instanceof TypeError &&
          /got a Float32Array of 32 elements|resized during the copy \(now 128 bytes\)/.test(
            error.message,
          ),
      );
      const back = await startCopy(previous, "cpu").get();
      assert.deepEqual([...(back[0] as Tensor).toTypedArray()], new Array(16).fill(1));
      assert.deepEqual([...(back[1] as Tensor).toTypedArray()], new Array(16).fill(2));
      disposeAll([previous, back]);
    },
  });
}

Deno.test({
  ...gpu,
  name:
    "leaves whose size properties lie are copied at the engine's size or refused, never read past their buffer",
  async fn() {
    // An own `byteLength` of 4 MiB on 16 real bytes: the copy read past the
    // buffer (neighbouring memory sent to the device, or a crash).
    const lying = () => {
      const view = new Uint8Array(16).fill(9);
      Object.defineProperty(view, "byteLength", { value: 4 << 20 });
      Object.defineProperty(view, "length", { value: 4 << 20 });
      return view;
    };
    for (
      const options of [
        {},
        { usePinnedStaging: false },
        { packCpuTensors: false },
        { packCpuTensors: false, usePinnedStaging: false },
      ]
    ) {
      const input = [lying(), lying(), Tensor.from(lying())];
      // Sent at the engine's size, or refused where packing by `set`
      // compares the view's own (lying) size with the walk's: an error,
      // never bytes from past the buffer.
      let onDevice;
      try {
        onDevice = await startCopy(input, "cuda:0", options).get();
      } catch (error) {
        assert.match(
          String(error),
          /^TypeError: Cannot copy a tensor of 16 bytes whose buffer was detached or resized during the copy \(now 4194304 bytes\)/,
        );
        continue;
      }
      const back = await startCopy(onDevice, "cpu").get();
      for (const tensor of back) {
        assert.deepEqual([...(tensor as Tensor).toTypedArray()], new Array(16).fill(9));
      }
      disposeAll([onDevice, back]);
    }
  },
});

Deno.test({
  ...gpu,
  name:
    "leaves a compiled walk packed as it read them land with the bytes they had, though their buffers are resized or detached later in the walk or while the copy waits",
  async fn() {
    const MiB = 1024 * 1024;
    const make = (resize: () => void) => {
      const buffer = new ArrayBuffer(64, { maxByteLength: 256 });
      const tracking = new Float32Array(buffer).fill(1.5); // tracks the buffer's length
      const plain = randomArray(Float32Array, 16, 5);
      const expected = [bytesOf(tracking), bytesOf(plain)];
      return {
        input: {
          a: tracking,
          b: plain,
          c: {
            get resize() {
              resize.call(buffer);
              return 0;
            },
          },
        },
        expected,
        detach: () => [tracking, plain].forEach((leaf) => leaf.buffer.transfer(0)),
      };
    };
    // The structure comes again: its plan is compiled and packs during its walk.
    for (let i = 0; i < 4; i++) disposeAll(await startCopy(make(() => {}).input, "cuda:0").get());
    for (
      const resize of [
        function (this: ArrayBuffer) {
          this.resize(128);
        },
        function (this: ArrayBuffer) {
          this.resize(16);
        },
      ]
    ) {
      const before = packedWalkCounts().packed;
      const { input, expected } = make(resize);
      const result = await startCopy(input, "cuda:0").get();
      assert.equal(packedWalkCounts().packed, before + 1, "packed during the walk");
      assert.deepEqual([bytesOf(result.a as Tensor), bytesOf(result.b as Tensor)], expected);
      disposeAll(result);
    }
    // Detached while the copy waits for device memory: staged already.
    const deviceInUse = devicePool(0).inUseBytes;
    const limits = setMemoryLimits({});
    try {
      setMemoryLimits({ deviceBytes: deviceInUse + 16 * MiB, waitMs: 10_000 });
      const first = await startCopy([randomArray(Uint8Array, 16 * MiB, 3)], "cuda:0").get();
      const { input, expected, detach } = make(() => {});
      const before = packedWalkCounts().packed;
      const handle = startCopy(input, "cuda:0");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(handle.ready(), false, "the copy must wait for memory");
      detach();
      disposeAll(first);
      const result = await handle.get();
      assert.equal(packedWalkCounts().packed, before + 1, "packed during the walk");
      assert.deepEqual([bytesOf(result.a as Tensor), bytesOf(result.b as Tensor)], expected);
      disposeAll(result);
    } finally {
      setMemoryLimits(limits);
    }
  },
});
