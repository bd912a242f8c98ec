import assert from "node:assert/strict";
import { startCopy, Tensor } from "../mod.ts";
import { CPU } from "../src/device.ts";
import { REJECTED_LEAF, sameDims, tensorInternals } from "../src/tensor.ts";
import { arrayCodeOf } from "../src/array_code.ts";
import { leafFields, readLeaf } from "../src/leaf_fields.ts";

Deno.test("Tensor.from() wraps host data without copying", () => {
  const data = new Float32Array([1, 2, 3, 4, 5, 6]);
  const tensor = Tensor.from(data, [2, 3]);
  assert.equal(tensor.dtype, "float32");
  assert.deepEqual(tensor.shape, [2, 3]);
  assert.equal(tensor.device, "cpu");
  assert.equal(tensor.numel, 6);
  assert.equal(tensor.byteLength, 24);
  assert.equal(tensor.pinned, false);
  assert.equal(tensor.toTypedArray(), data);
});

Deno.test("Tensor.from() maps every TypedArray class to its dtype", () => {
  const cases: [ArrayBufferView, string][] = [
    [new Float32Array(1), "float32"],
    [new Float64Array(1), "float64"],
    [new Int8Array(1), "int8"],
    [new Int16Array(1), "int16"],
    [new Int32Array(1), "int32"],
    [new BigInt64Array(1), "int64"],
    [new Uint8Array(1), "uint8"],
    [new Uint8ClampedArray(1), "uint8"],
    [new Uint16Array(1), "uint16"],
    [new Uint32Array(1), "uint32"],
    [new BigUint64Array(1), "uint64"],
    [new Float16Array(1), "float16"],
  ];
  for (const [data, dtype] of cases) {
    assert.equal(Tensor.from(data as Float32Array).dtype, dtype);
  }
});

Deno.test("Tensor.from() takes bool, bfloat16 and float16 from their storage classes", () => {
  assert.equal(Tensor.from(new Uint8Array(2), undefined, "bool").dtype, "bool");
  const bf16 = Tensor.from(new Uint16Array(2), [2], "bfloat16");
  assert.ok(bf16.toTypedArray() instanceof Uint16Array);
  const f16 = Tensor.from(new Uint16Array(2), [2], "float16");
  assert.ok(f16.toTypedArray() instanceof Float16Array);
  assert.ok(
    Tensor.from(new Float16Array(2), [2], "bfloat16").toTypedArray() instanceof Uint16Array,
  );
});

Deno.test("Tensor.toTypedArray() of a uint8 Uint8ClampedArray is a Uint8Array over the same bytes", () => {
  const data = new Uint8ClampedArray([1, 2]);
  const view = Tensor.from(data).toTypedArray();
  assert.ok(view instanceof Uint8Array);
  assert.equal(view.buffer, data.buffer);
});

Deno.test("Tensor.from() throws TypeError for mismatched or unknown types", () => {
  assert.throws(() => Tensor.from(new Float32Array(1), [1], "int32"), TypeError);
  assert.throws(() => Tensor.from(new Int8Array(1), [1], "bool"), TypeError);
  assert.throws(() => Tensor.from(new Float32Array(1), [1], "complex64" as never), {
    name: "TypeError",
    message: /^Invalid dtype: expected one of float16, .*, got "complex64"$/,
  });
  assert.throws(() => Tensor.from([1, 2] as never), TypeError);
  assert.throws(() => Tensor.from(new DataView(new ArrayBuffer(4)) as never), TypeError);
});

Deno.test("Tensor.from() throws RangeError when the shape does not hold the data", () => {
  assert.throws(() => Tensor.from(new Float32Array(6), [4, 2]), {
    name: "RangeError",
    message: "Invalid shape: expected 6 elements (the data's), got [4, 2] (8 elements)",
  });
  assert.throws(() => Tensor.from(new Float32Array(2), [-1, -2]), {
    name: "RangeError",
    message: "Invalid shape: expected non-negative integer dimensions, got [-1, -2]",
  });
  assert.throws(() => Tensor.from(new Float32Array(2), [1.5, 2]), RangeError);
  assert.equal(Tensor.from(new Float32Array(0), [0, 5]).numel, 0);
});

Deno.test("Tensor.from() accepts a view into part of a larger buffer", () => {
  const buffer = new ArrayBuffer(64);
  const view = new Int16Array(buffer, 6, 5);
  const tensor = Tensor.from(view);
  assert.equal(tensor.byteLength, 10);
  assert.equal(tensor.toTypedArray().byteOffset, 6);
});

Deno.test("Tensor.dispose() is idempotent and a disposed tensor cannot be read", () => {
  const tensor = Tensor.from(new Float32Array(2));
  tensor.dispose();
  tensor.dispose();
  assert.equal(tensor.disposed, true);
  assert.throws(() => tensor.toTypedArray(), { message: /disposed/ });
  assert.throws(() => tensor.ptr, { message: /disposed/ });
});

Deno.test("Tensor supports using declarations", () => {
  let outer: Tensor;
  {
    using tensor = Tensor.from(new Float32Array(1));
    outer = tensor;
  }
  assert.equal(outer.disposed, true);
});

Deno.test("Tensor.ptr of a CPU tensor points at its first byte", () => {
  const data = new Uint8Array([7, 8, 9]);
  const ptr = Tensor.from(data.subarray(1)).ptr!;
  assert.equal(new Deno.UnsafePointerView(ptr).getUint8(0), 8);
  assert.equal(Tensor.from(new Uint8Array(0)).ptr, null);
});

Deno.test("a tensor's dtype, device, byteLength and shape cannot be changed from outside", () => {
  const tensor = Tensor.from(new Float32Array(6), [2, 3]);
  assert.throws(() => {
    (tensor as { dtype: string }).dtype = "float64";
  }, TypeError);
  assert.throws(() => {
    (tensor as { device: string }).device = "cuda:0";
  }, TypeError);
  assert.throws(() => {
    (tensor as { byteLength: number }).byteLength = 1;
  }, TypeError);
  assert.throws(() => {
    (tensor.shape as number[])[0] = 7;
  }, TypeError);
  assert.deepEqual(tensor.shape, [2, 3]);
  assert.equal(tensor.dtype, "float32");
});

Deno.test("Tensor.from() rejects a view pushed out of bounds by a resize", () => {
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const view = new Float32Array(buffer, 8, 2);
  buffer.resize(4);
  assert.throws(() => Tensor.from(view), {
    name: "TypeError",
    message: "Cannot create a tensor over a view that no longer fits its resized buffer",
  });
  assert.equal(Tensor.from(new Float32Array(0)).numel, 0);
});

Deno.test("a tensor over a buffer detached after Tensor.from() throws instead of reading as empty", () => {
  const data = new Float32Array(4);
  const tensor = Tensor.from(data);
  data.buffer.transfer();
  assert.throws(() => tensor.toTypedArray(), /buffer was detached after it was wrapped/);
  assert.throws(() => tensor.ptr, /buffer was detached after it was wrapped/);
});

Deno.test("a tensor over a resizable buffer keeps its size: growth is ignored, shrinking throws", () => {
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const tensor = Tensor.from(new Float32Array(buffer)); // length-tracking: 4 elements now
  buffer.resize(64);
  assert.equal(tensor.toTypedArray().length, 4);
  assert.equal(tensor.numel, 4);
  buffer.resize(8);
  assert.throws(
    () => tensor.toTypedArray(),
    /buffer was shrunk below the tensor's bytes after it was wrapped/,
  );
});

Deno.test("a wrapped view that lies about its byteLength is measured by the engine: a shrunk buffer is refused, not read", async () => {
  for (const lie of ["own property", "subclass getter"]) {
    class Lying extends Float32Array {
      override get byteLength(): number {
        return 16;
      }
    }
    const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
    // Length-tracking: a copy to the CPU wraps it as it is (the user still holds it).
    const view = lie === "own property" ? new Float32Array(buffer) : new Lying(buffer);
    view.set([1, 2, 3, 4]);
    const [tensor] = await startCopy([view], "cpu").get();
    if (lie === "own property") Object.defineProperty(view, "byteLength", { value: 16 });
    buffer.resize(8); // 2 elements left; the view says 16 bytes still
    assert.equal(view.byteLength, 16, lie);
    assert.throws(() => tensor.toTypedArray(), /shrunk below the tensor's bytes/, lie);
    assert.throws(() => startCopy({ boxes: tensor }, "cpu"), TypeError, lie);
    buffer.resize(16); // its bytes exist again
    const { boxes } = await startCopy({ boxes: tensor }, "cpu").get();
    assert.deepEqual([...boxes.toTypedArray()], [1, 2, 0, 0], lie);
  }
});

Deno.test("a copy to the CPU of a length-tracking view keeps its shape while the buffer grows, and stays valid while its bytes exist", async () => {
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const leaf = new Float32Array(buffer); // no length: it tracks the buffer's
  leaf.set([1, 2, 3, 4]);
  const { boxes } = await startCopy({ boxes: leaf }, "cpu").get();
  buffer.resize(64); // growth is no error
  assert.deepEqual(boxes.shape, [4]);
  assert.deepEqual([...boxes.toTypedArray()], [1, 2, 3, 4]);
  assert.ok(boxes.ptr !== null);
  // Copied on (the generic walk, then its compiled plan), it keeps the shape too.
  for (let i = 0; i < 3; i++) {
    const { again } = await startCopy({ again: boxes }, "cpu").get();
    assert.deepEqual(again.shape, [4]);
    assert.equal(again.toTypedArray().length, 4);
  }
  buffer.resize(8); // below its bytes: refused
  assert.throws(() => boxes.toTypedArray(), /shrunk below the tensor's bytes/);
  assert.throws(() => startCopy({ again: boxes }, "cpu"), TypeError);
  buffer.resize(32); // its bytes exist again
  assert.deepEqual([...boxes.toTypedArray()], [1, 2, 0, 0]);
  buffer.transfer();
  assert.throws(() => boxes.toTypedArray(), /detached/);
});

Deno.test("tensorInternals.hostView answers what the plain reading answers (walkData and the fields), on hostile tensors", () => {
  // Differential: the one-call check of a copy into an earlier result
  // against walkData plus the tensor's fields read one by one.
  let seed = 17;
  const rand = (n: number) => { // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  let accepted = 0;
  const dtypes = ["float32", "int32", "uint8", "bool", "float64"] as const;
  const classes = [Float32Array, Int32Array, Uint8Array, Uint8Array, Float64Array];
  for (let trial = 0; trial < 3000; trial++) {
    const kind = rand(5);
    const length = rand(4) * 2;
    const resizable = rand(3) === 0;
    const size = classes[kind].BYTES_PER_ELEMENT;
    const buffer = resizable
      ? new ArrayBuffer(length * size, { maxByteLength: 64 * size })
      : new ArrayBuffer(length * size);
    // A length-tracking view over a resizable buffer, else a fixed one.
    const view = resizable ? new classes[kind](buffer) : new classes[kind](buffer, 0, length);
    const shape = length === 0 || rand(2) === 0 ? [length] : [2, length / 2];
    const tensor = Tensor.from(view, shape, dtypes[kind]);
    switch (rand(6)) {
      case 0:
        tensor.dispose();
        break;
      case 1:
        if (resizable) buffer.resize(rand(64) * size); // grown or shrunk
        break;
      case 2:
        buffer.transfer(); // detached
        break;
    }
    const dtype = rand(3) === 0 ? dtypes[rand(5)] : tensor.dtype;
    const byteLength = rand(4) === 0 ? rand(4) * 4 : tensor.byteLength;
    const wanted = rand(4) === 0 ? [rand(4)] : rand(2) === 0 ? [...tensor.shape] : tensor.shape;
    const fast = tensorInternals.hostView(tensor, dtype, byteLength, wanted);
    const data = tensorInternals.walkData(tensor);
    const plain = data !== undefined && data !== REJECTED_LEAF &&
        tensorInternals.device(tensor) === CPU && tensor.dtype === dtype &&
        tensor.byteLength === byteLength && sameDims(tensor.shape, wanted)
      ? data
      : undefined;
    assert.equal(fast, plain, `trial ${trial}`);
    if (fast !== undefined) accepted++;
  }
  assert.ok(accepted > 300 && accepted < 2700, `${accepted} accepted: both answers are tried`);
});

Deno.test("sameDims compares dimensions, not identity", () => {
  assert.ok(sameDims([2, 3], [2, 3]));
  assert.ok(!sameDims([2, 3], [3, 2]));
  assert.ok(!sameDims([2], [2, 1]));
  assert.ok(sameDims([], []));
});

Deno.test("the class code a tensor keeps is its data's, whatever happened to the data since (differential)", () => {
  // The kept code against arrayCodeOf of the data read now, on tensors of
  // every class (subclasses, views of resizable buffers that grew, shared
  // tensors), read before and after their buffers change.
  const fields = leafFields();
  const classes = [Float32Array, Int8Array, Uint8ClampedArray, Uint16Array, BigInt64Array];
  class Sub extends Uint16Array {}
  for (let trial = 0; trial < 200; trial++) {
    const cls = trial % 6 === 5 ? Sub : classes[trial % 5];
    const size = cls.BYTES_PER_ELEMENT;
    const buffer = new ArrayBuffer(4 * size, { maxByteLength: 64 * size });
    const view = trial % 2 === 0 ? new cls(buffer) : new cls(buffer, size, 2); // tracking or fixed
    const tensor = Tensor.from(view as never);
    const shared = tensorInternals.share(tensor);
    for (const step of [0, 1, 2]) {
      if (step === 1) buffer.resize(32 * size); // a tracking view grows: the tensor refixes it
      if (step === 2) buffer.resize(trial % 3 === 0 ? size : 40 * size); // shrunk (or grown again)
      for (const t of [tensor, shared]) {
        const data = tensorInternals.data(t)!;
        readLeaf(t, fields);
        assert.equal(fields.code, arrayCodeOf(data), `trial ${trial}, step ${step}`);
      }
    }
  }
});
