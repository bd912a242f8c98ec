// Results own their references on the GPU too: a tensor already on the
// target comes back as a new Tensor holding the same pooled memory (device
// storage for cuda:0, pinned storage for "cpu"), so that disposing a result
// never disposes an input, either may go first, and the pools return to
// their start once both are gone.

import assert from "node:assert/strict";
import { disposeAll, prefetch, setMemoryLimits, startCopy, type Tensor } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { bytesOf, flatten, hasGpu, ptrAddress, randomArray } from "./_helpers.ts";

const gpu = { ignore: !hasGpu };

Deno.test({
  ...gpu,
  name:
    "a CUDA tensor copied to its own device is a new Tensor holding the same storage, disposed in either order",
  async fn() {
    const pool = devicePool(0);
    const base = pool.stats().inUseBytes;
    const data = randomArray(Float32Array, 1000, 1);
    for (const inputFirst of [true, false]) {
      const [input] = await startCopy([data], "cuda:0").get();
      const held = pool.stats().inUseBytes;
      const handle = startCopy([input], "cuda:0");
      const [result] = await handle.get();
      assert.equal(handle.stats().copies, 0);
      assert.notEqual(result, input);
      assert.equal(result.device, "cuda:0");
      assert.equal(ptrAddress(result), ptrAddress(input));
      assert.equal(pool.stats().inUseBytes, held, "nothing allocated for a shared result");
      const [first, second] = inputFirst ? [input, result] : [result, input];
      first.dispose();
      assert.equal(second.disposed, false);
      // The block stays taken: a new copy gets other memory, the bytes stay.
      const [other] = await startCopy([randomArray(Float32Array, 1000, 2)], "cuda:0").get();
      assert.notEqual(ptrAddress(other), ptrAddress(second));
      assert.deepEqual(bytesOf(second), bytesOf(data));
      other.dispose();
      second.dispose();
      assert.equal(
        pool.stats().inUseBytes,
        base,
        `pool back to its start (input first: ${inputFirst})`,
      );
    }
  },
});

Deno.test({
  ...gpu,
  name: "a pinned CPU tensor copied to the CPU is a new pinned Tensor holding the same storage",
  async fn() {
    const pinned = pinnedPool.stats().inUseBytes;
    const data = randomArray(Float64Array, 300, 3);
    const [onDevice] = await startCopy([data], "cuda:0").get();
    const [input] = await startCopy([onDevice], "cpu").get();
    onDevice.dispose();
    assert.equal(input.pinned, true);
    const [result] = await startCopy([input], "cpu").get();
    assert.notEqual(result, input);
    assert.equal(result.pinned, true);
    assert.equal(ptrAddress(result), ptrAddress(input));
    input.dispose();
    assert.deepEqual(bytesOf(result), bytesOf(data));
    result.dispose();
    assert.equal(pinnedPool.stats().inUseBytes, pinned);
  },
});

Deno.test({
  ...gpu,
  name:
    "the reference batch copied again to its device: disposing the result leaves every input, packed chunks included",
  async fn() {
    const pool = devicePool(0);
    const base = pool.stats().inUseBytes;
    const batch = createBatchMetaData(16);
    const onDevice = await startCopy(batch, "cuda:0").get();
    const held = pool.stats().inUseBytes;
    for (let step = 0; step < 3; step++) {
      const again = await startCopy(onDevice, "cuda:0").get();
      assert.equal(pool.stats().inUseBytes, held);
      disposeAll(again);
    }
    const inputs = flatten(onDevice) as Tensor[];
    assert.ok(inputs.every((t) => !t.disposed));
    const sources = flatten(batch);
    inputs.forEach((t, i) => assert.deepEqual(bytesOf(t), bytesOf(sources[i] as Tensor)));
    disposeAll(onDevice);
    assert.equal(pool.stats().inUseBytes, base);
  },
});

Deno.test({
  ...gpu,
  name:
    "prefetch with disposePrevious over batches sharing one CUDA tensor leaves that tensor live",
  async fn() {
    const pool = devicePool(0);
    const base = pool.stats().inUseBytes;
    const [constant] = await startCopy([new Float32Array([1, 2, 3, 4])], "cuda:0").get();
    const source = Array.from({ length: 5 }, (_, i) => ({ constant, ids: new Int32Array([i]) }));
    let steps = 0;
    for await (const batch of prefetch(source, "cuda:0", { disposePrevious: true })) {
      assert.equal(ptrAddress(batch.constant), ptrAddress(constant));
      steps++;
    }
    assert.equal(steps, 5);
    assert.equal(constant.disposed, false);
    assert.deepEqual(bytesOf(constant), bytesOf(new Float32Array([1, 2, 3, 4])));
    constant.dispose();
    assert.equal(pool.stats().inUseBytes, base);
  },
});

Deno.test({
  ...gpu,
  name: "a copy that fails gives back the holds of its shared results (walk error, memory limit)",
  async fn() {
    const pool = devicePool(0);
    const base = pool.stats().inUseBytes;
    const [input] = await startCopy([randomArray(Float32Array, 64, 4)], "cuda:0").get();
    const cyclic: unknown[] = [];
    cyclic.push(cyclic);
    assert.throws(() => startCopy([input, cyclic], "cuda:0"), /cyclic/);
    const before = setMemoryLimits({});
    setMemoryLimits({ deviceBytes: 1 << 20 });
    try {
      const handle = startCopy({ input, big: new Float32Array(1 << 20) }, "cuda:0");
      await assert.rejects(handle.get(), /memory limit/);
    } finally {
      setMemoryLimits(before);
    }
    input.dispose();
    assert.equal(pool.stats().inUseBytes, base);
  },
});
