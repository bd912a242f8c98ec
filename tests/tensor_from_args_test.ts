import assert from "node:assert/strict";
import { Tensor } from "../mod.ts";
import { checkFromArgs } from "../src/tensor_from_args.ts";

Deno.test("checkFromArgs takes the dtype from the array class and the shape from its length", () => {
  const data = new Float32Array(6);
  const { type, dims, view } = checkFromArgs(data, undefined, undefined);
  assert.equal(type, "float32");
  assert.deepEqual(dims, [6]);
  assert.equal(view, data);
});

Deno.test("checkFromArgs copies the shape, stores +0 for -0, and keeps a fixed view over a resizable buffer", () => {
  const shape = [2, 3];
  const { dims } = checkFromArgs(new Int8Array(6), shape, undefined);
  assert.notEqual(dims, shape);
  assert.ok(Object.is(checkFromArgs(new Int8Array(0), [-0], undefined).dims[0], 0));
  const buffer = new ArrayBuffer(8, { maxByteLength: 16 });
  const tracking = new Uint8Array(buffer);
  const { view } = checkFromArgs(tracking, undefined, undefined);
  buffer.resize(16);
  assert.equal(view.length, 8);
});

Deno.test("checkFromArgs refuses what Tensor.from refuses, with the class API.md names", () => {
  assert.throws(() => checkFromArgs([1, 2] as never, undefined, undefined), {
    name: "TypeError",
    message: /Cannot create a tensor from Array: expected a TypedArray/,
  });
  assert.throws(() => checkFromArgs(new Float32Array(2), undefined, "int32"), {
    name: "TypeError",
    message: /Cannot create a "int32" tensor from a Float32Array/,
  });
  assert.throws(() => checkFromArgs(new Uint8Array(2), undefined, "half" as never), {
    name: "TypeError",
    message: /Invalid dtype: expected one of/,
  });
  assert.throws(() => checkFromArgs(new Uint8Array(6), [4], undefined), {
    name: "RangeError",
    message: /expected 6 elements/,
  });
  assert.throws(() => checkFromArgs(new Uint8Array(2), [1.5] as never, undefined), RangeError);
  const detached = new Uint8Array(4);
  structuredClone(detached.buffer, { transfer: [detached.buffer] });
  assert.throws(() => checkFromArgs(detached, undefined, undefined), {
    name: "TypeError",
    message: /detached/,
  });
});

Deno.test("Tensor.from reads the data's size from the engine, not from its properties", () => {
  const own = new Float32Array(4);
  Object.defineProperty(own, "length", { value: 1 << 20 });
  Object.defineProperty(own, "byteLength", { value: 4 << 20 });
  const tensor = Tensor.from(own);
  assert.deepEqual(tensor.shape, [4]);
  assert.equal(tensor.byteLength, 16);
  assert.throws(() => Tensor.from(own, [1 << 20]), RangeError);
});
