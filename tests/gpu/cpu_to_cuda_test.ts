import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import { disposeAll, startCopy, Tensor, type TypedArray } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { effectiveAlignment } from "../../src/pack_plan.ts";
import { releaseIdleStagers } from "../../src/memory/stager_pool.ts";
import { bytesOf, everyDtype, hasGpu, ptrAddress, randomArray } from "./_helpers.ts";

const gpu = { ignore: !hasGpu };

function assertSameBytes(input: unknown, output: unknown, path = "$"): void {
  if (ArrayBuffer.isView(input) || input instanceof Tensor) {
    assert.ok(output instanceof Tensor, `${path} is a Tensor`);
    assert.deepEqual(bytesOf(output), bytesOf(input as Tensor), `${path} bytes`);
    return;
  }
  if (Array.isArray(input)) {
    input.forEach((v, i) => assertSameBytes(v, (output as unknown[])[i], `${path}[${i}]`));
  } else if (input && typeof input === "object") {
    for (const key of Object.keys(input)) {
      assertSameBytes(
        (input as Record<string, unknown>)[key],
        (output as Record<string, unknown>)[key],
        `${path}.${key}`,
      );
    }
  }
}

for (const packCpuTensors of [true, false]) {
  for (const usePinnedStaging of [true, false]) {
    for (const useBackgroundThread of [true, false]) {
      const options = { packCpuTensors, usePinnedStaging, useBackgroundThread };
      Deno.test({
        ...gpu,
        name: `startCopy() to cuda:0 copies every dtype bit-exactly (${JSON.stringify(options)})`,
        async fn() {
          const input = {
            small: everyDtype(1),
            nested: [everyDtype(2), { bool: Tensor.from(new Uint8Array([0, 1, 1]), [3], "bool") }],
            bf16: Tensor.from(randomArray(Uint16Array, 6, 3), [2, 3], "bfloat16"),
            large: randomArray(Float32Array, 100_000, 4), // 400 KB: never packed
            huge: randomArray(Uint8Array, 9 * 1024 * 1024 + 5, 5), // Worker-staged when on
            text: "passthrough",
          };
          const handle = startCopy(input, "cuda:0", options);
          const result = await handle.get();
          assert.equal(handle.ready(), true);
          assert.equal(result.text, "passthrough");
          assert.equal(result.large.device, "cuda:0");
          assert.deepEqual(result.bf16.shape, [2, 3]);
          assert.equal(result.bf16.dtype, "bfloat16");
          assert.equal(result.nested[1].bool.dtype, "bool");
          assertSameBytes(input, result);
          const stats = handle.stats();
          assert.equal(stats.tensors, 30);
          assert.equal(stats.packedTensors, packCpuTensors ? 28 : 0);
          assert.equal(stats.chunks, packCpuTensors ? 1 : 0);
          disposeAll(result);
          releaseIdleStagers();
        },
      });
    }
  }
}

Deno.test({
  ...gpu,
  name:
    "a chunk of 1000 × 4 KB (packed by several threads) lands bit-exact, in one chunk and one DMA",
  async fn() {
    const tiles: TypedArray[] = Array.from(
      { length: 1000 },
      (_, i) => randomArray(Float32Array, 1024, 900 + i),
    );
    // Odd sizes between them: members at offsets that are not multiples of 4 KB.
    tiles.splice(500, 0, randomArray(Uint8Array, 13, 5), randomArray(Float64Array, 3, 6));
    const handle = startCopy(tiles, "cuda:0");
    const result = await handle.get();
    const stats = handle.stats();
    assert.equal(stats.packedTensors, 1002);
    assert.equal(stats.chunks, 1);
    assert.equal(stats.copies, 1);
    assertSameBytes(tiles, result);
    disposeAll(result);
  },
});

Deno.test({
  ...gpu,
  name: "startCopy() packs the reference batch into one chunk: 528 tensors, 528 packed",
  async fn() {
    const batch = createBatchMetaData(16);
    const handle = startCopy(batch, "cuda:0");
    const result = await handle.get();
    const stats = handle.stats();
    assert.equal(stats.tensors, 528);
    assert.equal(stats.packedTensors, 528);
    assert.equal(stats.chunks, 1);
    assert.equal(stats.copies, 1);
    assertSameBytes(batch, result);
    assert.deepEqual(result[3].cams_gt[2].proj_mat.shape, [3, 4]);
    disposeAll(result);
  },
});

Deno.test({
  ...gpu,
  name: "startCopy() places every packed tensor at an address of its effective alignment",
  async fn() {
    const input = everyDtype(7);
    for (const min of [1, 2, 6, 16, 64]) {
      const result = await startCopy(input, "cuda:0", { minPackedAlignmentBytes: min }).get();
      for (const [key, tensor] of Object.entries(result)) {
        const align = effectiveAlignment(min, tensor.byteLength / tensor.numel || 1);
        if (tensor.numel > 0) {
          assert.equal(ptrAddress(tensor) % align, 0, `${key} with min ${min}`);
        }
      }
      assertSameBytes(input, result);
      disposeAll(result);
    }
  },
});

Deno.test({
  ...gpu,
  name: "startCopy() splits packed tensors into chunks of at most maxPackedChunkBytes",
  async fn() {
    const input = Array.from({ length: 20 }, (_, i) => randomArray(Float32Array, 64, i));
    const handle = startCopy(input, "cuda:0", { maxPackedChunkBytes: 512 });
    const result = await handle.get();
    assert.equal(handle.stats().chunks, 10);
    assert.equal(handle.stats().copies, 10);
    assertSameBytes(input, result);
    disposeAll(result);
  },
});

Deno.test({
  ...gpu,
  name: "startCopy() returns a tensor already on the target as a new Tensor over the same memory",
  async fn() {
    const [onDevice] = await startCopy([new Int32Array([1, 2])], "cuda:0").get();
    const handle = startCopy({ again: onDevice, fresh: new Int8Array(1) }, "cuda");
    const result = await handle.get();
    assert.notEqual(result.again, onDevice);
    assert.equal(ptrAddress(result.again), ptrAddress(onDevice));
    disposeAll(result);
    assert.equal(onDevice.disposed, false);
    assert.deepEqual(bytesOf(onDevice), bytesOf(new Int32Array([1, 2])));
    onDevice.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "startCopy() to cuda:0 allocates nothing in steady state",
  async fn() {
    const batch = createBatchMetaData(16);
    for (let i = 0; i < 20; i++) disposeAll(await startCopy(batch, "cuda:0").get());
    const before = testAids!.counters();
    for (let i = 0; i < 200; i++) disposeAll(await startCopy(batch, "cuda:0").get());
    const after = testAids!.counters();
    assert.equal(after.hostAllocs - before.hostAllocs, 0);
    assert.equal(after.deviceAllocs - before.deviceAllocs, 0);
    assert.equal(after.copies - before.copies, 200);
  },
});

Deno.test({
  ...gpu,
  name: "startCopy() outputs share a chunk that returns to the pool when all are disposed",
  async fn() {
    const { devicePool } = await import("../../src/memory/device_memory.ts");
    const pool = devicePool(0);
    const inUse = pool.stats().inUseBytes;
    const result = await startCopy([new Float32Array(4), new Float32Array(4)], "cuda:0").get();
    assert.ok(pool.stats().inUseBytes > inUse);
    result[0].dispose();
    assert.ok(pool.stats().inUseBytes > inUse);
    result[1].dispose();
    assert.equal(pool.stats().inUseBytes, inUse);
    assert.throws(() => result[0].toTypedArray(), { message: /disposed/ });
  },
});

Deno.test({
  ...gpu,
  name: "Tensor.toTypedArray() on a CUDA tensor throws TypeError",
  async fn() {
    const [t] = await startCopy([new Float32Array(1)], "cuda:0").get();
    assert.throws(() => t.toTypedArray(), TypeError);
    assert.equal(t.pinned, false);
    t.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "subclassed, foreign and mislabelled TypedArrays reach cuda:0 with their own bytes",
  async fn() {
    const { default: vm } = await import("node:vm");
    class Boxes extends Float32Array {}
    const lying = randomArray(Float32Array, 9, 91);
    Object.defineProperty(lying, "constructor", { value: Int32Array });
    const input = {
      boxes: new Boxes(randomArray(Float32Array, 12, 92)),
      foreign: vm.runInNewContext("new Float64Array([1.25, -2.5, 3.75])") as Float64Array,
      lying,
      large: new Boxes(randomArray(Float32Array, 100_000, 93)), // unpacked, staged alone
    };
    const onDevice = await startCopy(input, "cuda:0").get();
    assert.equal(onDevice.lying.dtype, "float32");
    assertSameBytes(input, onDevice);
    disposeAll(onDevice);
  },
});

Deno.test({
  ...gpu,
  name:
    "TypedArrays over SharedArrayBuffers (a loader Worker's output) land bit-exact: packed, threaded, background-staged and growable",
  async fn() {
    const shared = <T extends TypedArray>(source: T, options?: { maxByteLength: number }): T => {
      const buffer = new SharedArrayBuffer(source.byteLength, options);
      new Uint8Array(buffer).set(
        new Uint8Array(source.buffer, source.byteOffset, source.byteLength),
      );
      return new (source.constructor as new (b: SharedArrayBuffer) => T)(buffer);
    };
    const input = {
      small: [shared(randomArray(Float32Array, 7, 1)), shared(randomArray(BigInt64Array, 3, 2))],
      tiles: Array.from({ length: 600 }, (_, i) => shared(randomArray(Int32Array, 1024, 10 + i))),
      large: shared(randomArray(Uint8Array, 8 << 20, 3)),
      growable: shared(randomArray(Float64Array, 1 << 18, 4), { maxByteLength: 4 << 20 }),
    };
    const onDevice = await startCopy(input, "cuda:0").get();
    for (
      const [a, b] of [
        ...input.small.map((array, i) => [array, onDevice.small[i]] as const),
        ...input.tiles.map((array, i) => [array, onDevice.tiles[i]] as const),
        [input.large, onDevice.large] as const,
        [input.growable, onDevice.growable] as const,
      ]
    ) {
      assert.deepEqual(
        bytesOf(b as Tensor),
        new Uint8Array(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)),
      );
    }
    disposeAll(onDevice);
  },
});
