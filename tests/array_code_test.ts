import assert from "node:assert/strict";
import { ARRAY_CLASSES, arrayCodeOf, CODE_BYTES, CODE_DTYPE, NO_CODE } from "../src/array_code.ts";
import { dtypeOfArray } from "../src/dtype.ts";

Deno.test("arrayCodeOf() names each built-in TypedArray class, its element size and dtype", () => {
  for (const cls of ARRAY_CLASSES) {
    const view = new cls(new ArrayBuffer(16));
    const code = arrayCodeOf(view);
    assert.equal(ARRAY_CLASSES[code], cls);
    assert.equal(CODE_BYTES[code], cls.BYTES_PER_ELEMENT);
    assert.equal(CODE_DTYPE[code], dtypeOfArray(view));
  }
});

Deno.test("arrayCodeOf() reads the internal class, not the constructor: a subclass is its base class", () => {
  class Boxes extends Float32Array {}
  const boxes = new Boxes(4);
  Object.defineProperty(boxes, "constructor", { value: Int32Array });
  assert.equal(ARRAY_CLASSES[arrayCodeOf(boxes)], Float32Array);
});

Deno.test("arrayCodeOf() gives NO_CODE for views that are no TypedArray", () => {
  assert.equal(arrayCodeOf(new DataView(new ArrayBuffer(4))), NO_CODE);
  assert.equal(arrayCodeOf(new Uint8Array(1)), ARRAY_CLASSES.indexOf(Uint8Array));
  assert.equal(arrayCodeOf(new DataView(new ArrayBuffer(4))), NO_CODE, "after a TypedArray too");
  assert.equal(arrayCodeOf({ [Symbol.toStringTag]: "Float32Array" } as never), NO_CODE);
});
