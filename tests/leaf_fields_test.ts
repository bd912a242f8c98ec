import assert from "node:assert/strict";
import { Tensor } from "../mod.ts";
import { registerArena, unregisterArena } from "../src/arena_index.ts";
import { ARRAY_CLASSES, arrayCodeOf, NO_CODE } from "../src/array_code.ts";
import { leafFields, readLeaf } from "../src/leaf_fields.ts";

// A leaf reads the same whoever reads it (the route, a copy into a result):
// a TypedArray as the CPU tensor that would wrap it.

Deno.test("readLeaf reads a TypedArray as a CPU tensor of its class's dtype and shape [length]", () => {
  const fields = leafFields();
  const cases: [ArrayBufferView & { length: number }, string][] = [
    [new Float32Array(5), "float32"],
    [new Uint8ClampedArray(3), "uint8"],
    [new BigInt64Array(2), "int64"],
    [new (class Sub extends Int16Array {})(4), "int16"], // a subclass reads as its base class
  ];
  for (const [view, dtype] of cases) {
    readLeaf(view as never, fields);
    assert.deepEqual(
      [fields.device, fields.dtype, fields.shape, fields.byteLength, fields.storage, fields.arena],
      [-1, dtype, [view.length], view.byteLength, undefined, undefined],
    );
    assert.ok(view instanceof ARRAY_CLASSES[fields.code]);
    assert.ok(Object.isFrozen(fields.shape)); // shared with the outputs: never changed
  }
});

Deno.test("readLeaf reads a Tensor's own fields, and the class code of the data it wraps", () => {
  const fields = leafFields();
  readLeaf(new Float32Array(1), fields); // leaves a code behind
  const tensor = Tensor.from(new Uint16Array(6), [2, 3], "float16");
  for (let read = 0; read < 2; read++) { // found once, then kept
    readLeaf(tensor, fields);
    assert.deepEqual(
      [fields.device, fields.dtype, fields.shape, fields.byteLength, fields.code],
      [-1, "float16", [2, 3], 12, arrayCodeOf(new Uint16Array(0))],
    );
  }
  // A subclass reads as its built-in class; a tensor over no data has no code.
  class Sub extends Int8Array {}
  readLeaf(Tensor.from(new Sub(2)), fields);
  assert.equal(fields.code, arrayCodeOf(new Int8Array(0)));
  const empty = Tensor.from(new Float64Array(1));
  empty.dispose();
  readLeaf(empty, fields);
  assert.equal(fields.code, NO_CODE);
});

Deno.test("readLeaf finds the host arena a TypedArray's buffer is memory of", () => {
  const fields = leafFields();
  const buffer = new ArrayBuffer(64);
  const arena = { address: 4096, hold() {}, release() {} };
  registerArena(buffer, arena);
  try {
    readLeaf(new Float32Array(buffer, 16, 2), fields);
    assert.equal(fields.arena, arena);
    readLeaf(new Float32Array(2), fields);
    assert.equal(fields.arena, undefined);
  } finally {
    unregisterArena(buffer);
  }
});
