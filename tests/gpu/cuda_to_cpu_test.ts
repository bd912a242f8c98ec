import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import { disposeAll, startCopy, Tensor } from "../../mod.ts";
import type { TypedArray } from "../../src/dtype.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import {
  assertRoundTrip,
  everyDtype,
  flatten,
  hasGpu,
  ptrAddress,
  randomArray,
} from "./_helpers.ts";

const gpu = { ignore: !hasGpu };

for (const packCpuTensors of [true, false]) {
  for (const usePinnedStaging of [true, false]) {
    const options = { packCpuTensors, usePinnedStaging };
    Deno.test({
      ...gpu,
      name: `cuda:0 → cpu round trip is bit-exact for every dtype (${JSON.stringify(options)})`,
      async fn() {
        const input = {
          small: everyDtype(21),
          large: randomArray(Float64Array, 50_000, 22),
          bool: Tensor.from(new Uint8Array([1, 0, 1]), [3], "bool"),
        };
        const onDevice = await startCopy(input, "cuda:0", options).get();
        const handle = startCopy(onDevice, "cpu", options);
        const back = await handle.get();
        assertRoundTrip(input, back, "cpu");
        for (const tensor of flatten(back) as Tensor[]) {
          assert.equal(tensor.pinned, usePinnedStaging);
          assert.equal(tensor.toTypedArray().length, tensor.numel);
        }
        assert.equal(back.bool.dtype, "bool");
        assert.deepEqual([...back.bool.toTypedArray()], [1, 0, 1]);
        const stats = handle.stats();
        assert.equal(stats.packedTensors, packCpuTensors ? 14 : 0);
        disposeAll([onDevice, back]);
      },
    });
  }
}

/** The tensors of a result in falling address order: no two lie in order (no run). */
function scattered(onDevice: unknown): Tensor[] {
  return (flatten(onDevice) as Tensor[]).slice().reverse();
}

Deno.test({
  ...gpu,
  name:
    "the reference batch copied back leaves the GPU as it lies: one device-to-host transfer, no gather kernel",
  async fn() {
    const batch = createBatchMetaData(16);
    const onDevice = await startCopy(batch, "cuda:0").get();
    const before = testAids!.counters();
    const handle = startCopy(onDevice, "cpu");
    const back = await handle.get();
    const after = testAids!.counters();
    const stats = handle.stats();
    assert.equal(stats.tensors, 528);
    assert.equal(stats.packedTensors, 528);
    assert.equal(stats.chunks, 1);
    assert.equal(stats.copies, 1);
    assert.equal(after.copies - before.copies, 1);
    assert.equal(after.kernels - before.kernels, 0);
    assertRoundTrip(batch, back, "cpu");
    // Each output lies at its device address's distance from the range's
    // start, so it keeps that address's alignment (modulo 256).
    const sources = flatten(onDevice) as Tensor[];
    const outputs = flatten(back) as Tensor[];
    const first = outputs.findIndex((tensor) => tensor.byteLength > 0);
    outputs.forEach((tensor, i) => {
      assert.ok(tensor.pinned);
      if (tensor.byteLength === 0) return;
      assert.equal(ptrAddress(tensor) % 256, ptrAddress(sources[i]) % 256, `leaf ${i}`);
      assert.equal(
        ptrAddress(tensor) - ptrAddress(outputs[first]),
        ptrAddress(sources[i]) - ptrAddress(sources[first]),
        `leaf ${i}`,
      );
    });
    disposeAll([onDevice, back]);
  },
});

Deno.test({
  ...gpu,
  name:
    "tensors that do not lie in order on the GPU are gathered by one kernel into one transfer per chunk",
  async fn() {
    const batch = createBatchMetaData(16);
    const onDevice = await startCopy(batch, "cuda:0").get();
    const before = testAids!.counters();
    const handle = startCopy(scattered(onDevice), "cpu");
    const back = await handle.get();
    const after = testAids!.counters();
    const stats = handle.stats();
    assert.equal(stats.packedTensors, 528);
    assert.equal(stats.chunks, 1);
    assert.equal(stats.copies, 1);
    assert.equal(after.copies - before.copies, 1);
    assert.equal(after.kernels - before.kernels, 1);
    assertRoundTrip(flatten(batch).reverse(), back, "cpu");
    disposeAll([onDevice, back]);
  },
});

Deno.test({
  ...gpu,
  name:
    "copies to the CPU by runs and gathers agree bit for bit with one copy per tensor, on hostile layouts",
  async fn() {
    // Differential: tensors of three results (so three device blocks),
    // picked in random orders and subsets, with empty and large ones,
    // copied back with packing (runs where they lie in order, a gather
    // elsewhere) and without (one DMA per tensor, the plain path).
    let seed = 5;
    const rand = (n: number) => {
      seed = (seed * 16807) % 2147483647;
      return seed % n;
    };
    const makers = [Float32Array, Uint8Array, Int16Array, Float64Array, BigInt64Array] as const;
    const results = [];
    for (let r = 0; r < 3; r++) {
      const input = Array.from({ length: 40 }, (_, i) => {
        const cls = makers[rand(makers.length)];
        const length = rand(10) === 0 ? 0 : rand(5) === 0 ? 40_000 : 1 + rand(70);
        return randomArray(cls as never, length, 100 * r + i);
      });
      results.push({ input, onDevice: await startCopy(input, "cuda:0").get() });
    }
    let runs = 0;
    for (let trial = 0; trial < 40; trial++) {
      const picked: [TypedArray, Tensor][] = [];
      const count = 1 + rand(60);
      let r = rand(3), i = rand(40);
      for (let k = 0; k < count; k++) {
        // Mostly onward from the last pick (runs), sometimes anywhere.
        if (rand(4) === 0) r = rand(3), i = rand(40);
        else i = (i + 1 + (rand(5) === 0 ? 1 : 0)) % 40;
        picked.push([results[r].input[i], results[r].onDevice[i]]);
      }
      const sources = picked.map(([, t]) => t);
      const before = testAids!.counters();
      // Every third trial with chunks (and so runs) of at most 1000 bytes.
      const handle = startCopy(
        sources,
        "cpu",
        trial % 3 === 0 ? { maxPackedChunkBytes: 1000 } : {},
      );
      const packed = await handle.get();
      if (testAids!.counters().kernels === before.kernels && handle.stats().chunks > 0) runs++;
      const plain = await startCopy(sources, "cpu", { packCpuTensors: false }).get();
      assertRoundTrip(picked.map(([a]) => a), packed, "cpu");
      assertRoundTrip(plain, packed, "cpu");
      disposeAll([packed, plain]);
    }
    assert.ok(runs > 5, `${runs} trials went by runs alone`);
    for (const { onDevice } of results) disposeAll(onDevice);
  },
});

Deno.test({
  ...gpu,
  name:
    "where the driver cannot load the gather kernel, gathers fall back to one copy per tensor, bit-exact",
  async fn() {
    const batch = createBatchMetaData(16, 7);
    const nonEmpty = flatten(batch).filter((t) => t.byteLength > 0).length;
    const onDevice = await startCopy(batch, "cuda:0").get();
    testAids!.disableKernels(true);
    try {
      const before = testAids!.counters();
      const back = await startCopy(scattered(onDevice), "cpu").get();
      const after = testAids!.counters();
      assert.equal(after.kernels - before.kernels, 0);
      // One device-to-device copy per non-empty tensor, then the one transfer.
      assert.equal(after.copies - before.copies, nonEmpty + 1);
      assertRoundTrip(flatten(batch).reverse(), back, "cpu");
      disposeAll(back);
    } finally {
      testAids!.disableKernels(false);
      disposeAll(onDevice);
    }
  },
});

Deno.test({
  ...gpu,
  name: "chained copies without awaiting the data in between are ordered",
  async fn() {
    const input = [randomArray(Int32Array, 1000, 31), randomArray(Uint8Array, 300_000, 32)];
    for (let i = 0; i < 20; i++) {
      const there = startCopy(input, "cuda:0");
      const back = startCopy(await there.get(), "cpu");
      const again = startCopy(await back.get(), "cuda:0");
      const final = await startCopy(await again.get(), "cpu").get();
      assertRoundTrip(input, final, "cpu");
      disposeAll([await there.get(), await back.get(), await again.get(), final]);
    }
  },
});

Deno.test({
  ...gpu,
  name:
    "mixed CPU and CUDA inputs reach either target; tensors already there are shared, not copied",
  async fn() {
    const [onDevice] = await startCopy([randomArray(Float32Array, 10, 41)], "cuda:0").get();
    const cpuTensor = Tensor.from(randomArray(Int16Array, 5, 42));
    const input = { onDevice, cpuTensor, raw: randomArray(Uint8Array, 7, 43), text: "x" };
    const toCpu = await startCopy(input, "cpu").get();
    // A new Tensor over the same memory: the result owns its references.
    assert.notEqual(toCpu.cpuTensor, cpuTensor);
    assert.equal(toCpu.cpuTensor.toTypedArray(), cpuTensor.toTypedArray());
    assert.equal(toCpu.text, "x");
    assertRoundTrip(
      [onDevice, cpuTensor, input.raw],
      [toCpu.onDevice, toCpu.cpuTensor, toCpu.raw],
      "cpu",
    );
    const toGpu = await startCopy(input, "cuda:0").get();
    assert.notEqual(toGpu.onDevice, onDevice);
    assert.equal(ptrAddress(toGpu.onDevice), ptrAddress(onDevice));
    assertRoundTrip(
      [onDevice, cpuTensor, input.raw],
      [toGpu.onDevice, toGpu.cpuTensor, toGpu.raw],
      "cuda:0",
    );
    // Every result can be disposed: the inputs stay usable until disposed themselves.
    disposeAll([toCpu, toGpu]);
    assert.equal(onDevice.disposed, false);
    assert.equal(cpuTensor.disposed, false);
    disposeAll([onDevice, cpuTensor]);
  },
});

Deno.test({
  ...gpu,
  name: "a pinned CPU tensor is sent to the GPU straight from its pinned memory",
  async fn() {
    const input = [randomArray(Float32Array, 100_000, 51), randomArray(Uint8Array, 9, 52)];
    const onDevice = await startCopy(input, "cuda:0").get();
    const pinned = await startCopy(onDevice, "cpu").get();
    assert.ok(pinned.every((t) => t.pinned));
    const again = await startCopy(pinned, "cuda:0").get();
    assertRoundTrip(input, again, "cuda:0");
    disposeAll([onDevice, pinned, again]);
  },
});

Deno.test({
  ignore: !hasGpu,
  name:
    "an empty tensor copied back in a run is readable as its dtype, also where the run starts at a byte no wider dtype is aligned to",
  async fn() {
    // Packed with an alignment of 1, the run [u8(5), i64(0)] starts at
    // byte 3 of the chunk: the empty int64 was bound there, and its view
    // threw RangeError (without pinned staging the copy itself failed).
    const onDevice = await startCopy(
      [new Uint8Array(3), new Uint8Array(5).fill(7), new BigInt64Array(0), new Float64Array(0)],
      "cuda:0",
      { minPackedAlignmentBytes: 1 },
    ).get();
    for (const options of [{}, { usePinnedStaging: false }]) {
      const back = await startCopy(onDevice.slice(1), "cpu", options).get();
      assert.deepEqual([...(back[0] as Tensor).toTypedArray()], [7, 7, 7, 7, 7]);
      assert.deepEqual((back[1] as Tensor).toTypedArray(), new BigInt64Array(0));
      assert.deepEqual((back[2] as Tensor).toTypedArray(), new Float64Array(0));
      disposeAll(back);
    }
    disposeAll(onDevice);
  },
});
