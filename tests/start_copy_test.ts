import { TensorLayout } from "../src/tensor_layout.ts";
import assert from "node:assert/strict";
import { deviceCount, disposeAll, setMemoryLimits, startCopy, Tensor } from "../mod.ts";
import { CPU } from "../src/device.ts";
import { BlockPool } from "../src/memory/block_pool.ts";
import { Storage } from "../src/memory/storage.ts";
import { tensorInternals } from "../src/tensor.ts";
import { vectorShape } from "../src/vector_shape.ts";

Deno.test("startCopy() to cpu wraps TypedArray leaves over the same memory", async () => {
  const boxes = new Float32Array([1, 2, 3, 4]);
  const handle = startCopy({ boxes, label: "car" }, "cpu");
  const result = await handle.get();
  assert.ok(result.boxes instanceof Tensor);
  assert.equal(result.boxes.toTypedArray(), boxes);
  assert.equal(result.label, "car");
  assert.equal(handle.ready(), true);
  assert.deepEqual(handle.stats(), {
    tensors: 1,
    bytes: 16,
    packedTensors: 0,
    chunks: 0,
    copies: 0,
  });
});

Deno.test("startCopy() to cpu returns a CPU Tensor as a new Tensor over the same memory; disposing the result leaves the input", async () => {
  const data = new Int32Array([1, 2, 3]);
  const tensor = Tensor.from(data);
  const [out] = await startCopy([tensor], "cpu").get();
  assert.notEqual(out, tensor);
  assert.equal(out.toTypedArray(), data);
  disposeAll([out]);
  assert.equal(tensor.disposed, false);
  // The input can be copied again, and disposed before its new result.
  const [again] = await startCopy([tensor], "cpu").get();
  tensor.dispose();
  assert.deepEqual([...again.toTypedArray()], [1, 2, 3]);
});

Deno.test("startCopy() without a device throws TypeError at once, naming it", () => {
  const batch = [{ boxes: new Float32Array(4) }];
  const expected = { name: "TypeError", message: /Invalid device undefined/ };
  assert.throws(() => (startCopy as (data: unknown) => unknown)(batch), expected);
  assert.throws(() => startCopy(batch, undefined as unknown as string), expected);
});

/** A pool over made-up addresses: binding needs addresses, not memory. */
function addressPool(): BlockPool {
  let next = 1 << 20;
  return new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free() {} });
}

/** A tensor on `device` bound to a fresh block of `pool` (its one hold); its bytes are never read. */
function pooledTensor(pool: BlockPool, device: number, bytes = 64): Tensor {
  const tensor = tensorInternals.create(
    new TensorLayout("float32", vectorShape(bytes / 4), bytes, device),
  );
  tensorInternals.bind(tensor, new Storage(pool, pool.acquire(bytes), 1), 0);
  return tensor;
}

Deno.test("a copy whose walk fails gives back the holds its results took on inputs already on the target", () => {
  const pool = addressPool();
  // Pooled CPU memory, as pinned results are: to "cpu" it is shared, not read.
  const pinned = pooledTensor(pool, CPU);
  const cyclic: unknown[] = [];
  cyclic.push(cyclic);
  assert.throws(() => startCopy([pinned, cyclic], "cpu"), /cyclic/);
  pinned.dispose();
  assert.equal(pool.stats().inUseBytes, 0);
});

Deno.test("a copy that fails after its walk gives back the holds its results took", async () => {
  const pool = addressPool();
  const pinned = pooledTensor(pool, CPU);
  // A (made-up) device tensor to bring back: more pinned memory than the limit.
  const onDevice = pooledTensor(pool, 0, 4096);
  const before = setMemoryLimits({});
  setMemoryLimits({ pinnedBytes: 1024 });
  try {
    const handle = startCopy({ pinned, onDevice }, "cpu");
    await assert.rejects(handle.get(), /memory limit/);
  } finally {
    setMemoryLimits(before);
  }
  pinned.dispose();
  onDevice.dispose();
  assert.equal(pool.stats().inUseBytes, 0);
});

Deno.test("startCopy() get() returns the same Promise every call", () => {
  const handle = startCopy([new Int8Array(1)], "cpu");
  assert.equal(handle.get(), handle.get());
  return handle.get().then(() => {});
});

Deno.test("startCopy() keeps structure, order and passthrough identity", async () => {
  const opaque = new URL("file:///opaque");
  class Custom {
    x = new Float32Array(1);
  }
  const custom = new Custom();
  const input = {
    z: [new Uint16Array(2), opaque, null],
    a: new Map<string, unknown>([["c", custom], ["t", new BigInt64Array(1)]]),
  };
  const result = await startCopy(input, "cpu").get();
  assert.deepEqual(Object.keys(result), ["z", "a"]);
  assert.equal(result.z[1], opaque);
  assert.equal(result.z[2], null);
  assert.equal(result.a.get("c"), custom);
  assert.ok(result.a.get("t") instanceof Tensor);
});

Deno.test("startCopy() throws synchronously for bad devices, options and structures", () => {
  const data = [new Float32Array(1)];
  assert.throws(() => startCopy(data, "gpu:0"), { name: "TypeError", message: /"gpu:0"/ });
  assert.throws(() => startCopy(data, "cpu", { maxPackedChunkBytes: 0 }), RangeError);
  assert.throws(() => startCopy(data, "cpu", { packCpuTensors: "yes" as never }), TypeError);
  const cyclic: unknown[] = [];
  cyclic.push(cyclic);
  assert.throws(() => startCopy(cyclic, "cpu"), TypeError);
  const detached = new Float32Array(2);
  detached.buffer.transfer();
  assert.throws(() => startCopy({ d: detached }, "cpu"), TypeError);
  const count = deviceCount();
  assert.throws(
    () => startCopy(data, `cuda:${count}`),
    count === 0 ? { name: "Error", message: /no usable CUDA device/ } : RangeError,
  );
});

Deno.test("startCopy() throws for a disposed tensor input", () => {
  const tensor = Tensor.from(new Float32Array(1));
  tensor.dispose();
  assert.throws(() => startCopy([tensor], "cpu"), { message: /disposed/ });
});
