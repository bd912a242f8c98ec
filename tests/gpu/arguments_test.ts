import assert from "node:assert/strict";
import { describe, parseCudaDevice } from "../../src/gpu/arguments.ts";

// How the GPU API reads its arguments, without a GPU.

Deno.test("parseCudaDevice: cpu and what is no device string are refused, naming the argument", () => {
  assert.throws(() => parseCudaDevice("cpu", "options.device"), {
    name: "TypeError",
    message: 'Invalid options.device "cpu": expected "cuda" or "cuda:N"',
  });
  assert.throws(() => parseCudaDevice("gpu:0"), TypeError);
});

Deno.test("describe: null, strings quoted, objects by their class, other primitives as String writes them", () => {
  assert.equal(describe(null), "null");
  assert.equal(describe("x"), '"x"');
  assert.equal(describe(new Map()), "Map");
  assert.equal(describe(Object.create(null)), "an object");
  assert.equal(describe(1.5), "1.5");
  assert.equal(describe(2n), "2");
  assert.equal(describe(Symbol("s")), "Symbol(s)");
});

Deno.test({
  name: "describe: a value whose constructor getter throws is still described",
  fn() {
    const hostile = {
      get constructor(): never {
        throw new Error("from the getter");
      },
    };
    assert.equal(typeof describe(hostile), "string");
  },
});
