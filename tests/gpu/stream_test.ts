import assert from "node:assert/strict";
import { describe, parseCudaDevice } from "../../src/gpu/arguments.ts";
import { checkStream } from "../../src/gpu/stream.ts";

// What needs no GPU: the argument checks. Streams themselves are specified
// on a GPU in tests/gpu/ordering_test.ts and two_gpus_ordering_test.ts.

Deno.test("parseCudaDevice: cpu and what is no device string are refused, naming the argument", () => {
  assert.throws(() => parseCudaDevice("cpu", "options.device"), {
    name: "TypeError",
    message: 'Invalid options.device "cpu": expected "cuda" or "cuda:N"',
  });
  assert.throws(() => parseCudaDevice("gpu:0"), TypeError);
});

Deno.test("checkStream: anything but a CudaStream is a TypeError naming the argument and the value", () => {
  for (
    const [value, shownAs] of [
      [null, "null"],
      [undefined, "undefined"],
      [0, "0"],
      ["s", '"s"'],
      [{}, "Object"],
      [Object.create(null), "an object"],
    ] as const
  ) {
    assert.throws(() => checkStream(value, "stream"), {
      name: "TypeError",
      message: `Invalid stream: expected a CudaStream, got ${shownAs}`,
    });
  }
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
