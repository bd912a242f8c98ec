import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { buildShape, type IntoShape } from "../../src/reuse/into_shape.ts";
import { resultLike } from "./_into_fixtures.ts";

// A result's structure is read from the result (each tensor checked by the
// caller, none twice); into_match_test.ts matches data against it.

Deno.test("buildShape records the result's tensors in the walk's order", () => {
  const { result, outputs } = resultLike();
  const shape = buildShape(result) as IntoShape;
  assert.equal(typeof shape, "object");
  assert.deepEqual(shape.tensors, outputs);
  assert.equal(shape.passes, 2); // name, and the Map's null
});

Deno.test("buildShape says where a tensor is refused, met twice, or that there is none", () => {
  const { result, outputs } = resultLike();
  const refuse = (tensor: Tensor) => tensor === outputs[2] ? "is refused" : undefined;
  assert.equal(buildShape(result, refuse), "$.ids is refused");
  result.boxes[1] = result.boxes[0];
  assert.equal(buildShape(result), "$.boxes[1] is a tensor met before");
  assert.equal(buildShape({ a: 1, b: [] }), "it holds no tensor");
  const cyclic: unknown[] = [Tensor.from(new Uint8Array(1))];
  cyclic.push(cyclic);
  assert.equal(buildShape(cyclic), "$[1] is a cycle");
});
