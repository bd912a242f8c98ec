import assert from "node:assert/strict";
import vm from "node:vm";
import { startCopy, Tensor } from "../mod.ts";
import { dtypeOfArray, isTypedArray } from "../src/dtype.ts";

class Boxes extends Float32Array {}

function foreignFloat64(): Float64Array {
  return vm.runInNewContext("new Float64Array([1.5, 2.5])") as Float64Array;
}

function withLyingConstructor(): Float32Array {
  const array = new Float32Array([1, 2, 3]);
  Object.defineProperty(array, "constructor", { value: Int32Array });
  return array;
}

Deno.test("a TypedArray's dtype is its internal type: subclasses, other realms, a lying constructor", () => {
  assert.equal(dtypeOfArray(new Boxes(2)), "float32");
  assert.equal(dtypeOfArray(foreignFloat64()), "float64");
  assert.equal(dtypeOfArray(withLyingConstructor()), "float32");
  const reprototyped = new Int16Array(2);
  Object.setPrototypeOf(reprototyped, Uint32Array.prototype);
  assert.equal(dtypeOfArray(reprototyped), "int16");
  assert.equal(dtypeOfArray(new DataView(new ArrayBuffer(4))), undefined);
  assert.equal(isTypedArray(new Boxes(1)), true);
  assert.equal(isTypedArray({ constructor: Float32Array, length: 1 }), false);
});

Deno.test("startCopy() treats subclassed, foreign and mislabelled TypedArrays as tensors, never as opaque values", async () => {
  const input = {
    boxes: new Boxes([1, 2]),
    foreign: foreignFloat64(),
    lying: withLyingConstructor(),
  };
  const out = await startCopy(input, "cpu").get();
  for (const key of ["boxes", "foreign", "lying"] as const) {
    assert.ok(out[key] instanceof Tensor, key);
  }
  assert.equal(out.boxes.dtype, "float32");
  assert.equal(out.foreign.dtype, "float64");
  assert.equal(out.lying.dtype, "float32");
  assert.deepEqual([...(out.lying.toTypedArray() as Float32Array)], [1, 2, 3]);
});

Deno.test("Tensor.from() takes a subclass, and toTypedArray() gives the built-in class over the same bytes", () => {
  const data = new Boxes([4, 5, 6]);
  const tensor = Tensor.from(data, [3]);
  const view = tensor.toTypedArray();
  assert.equal(Object.getPrototypeOf(view), Float32Array.prototype);
  assert.equal(view.buffer, data.buffer);
  assert.deepEqual([...(view as Float32Array)], [4, 5, 6]);
});
