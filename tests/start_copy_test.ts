import assert from "node:assert/strict";
import { deviceCount, startCopy, Tensor } from "../mod.ts";

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

Deno.test("startCopy() to cpu returns a CPU Tensor as the same instance", async () => {
  const tensor = Tensor.from(new Int32Array(3));
  const [out] = await startCopy([tensor], "cpu").get();
  assert.equal(out, tensor);
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
