import assert from "node:assert/strict";
import { checkStream } from "../../src/gpu/stream.ts";

// What needs no GPU: the argument checks. Streams themselves are specified
// on a GPU in tests/gpu/ordering_test.ts and two_gpus_ordering_test.ts.

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
