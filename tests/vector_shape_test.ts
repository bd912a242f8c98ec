import assert from "node:assert/strict";
import { vectorShape } from "../src/vector_shape.ts";

Deno.test("vectorShape gives one frozen [length] per length, short or long", () => {
  for (const length of [0, 1, 4095, 4096, 1 << 20]) {
    const shape = vectorShape(length);
    assert.deepEqual(shape, [length]);
    assert.ok(Object.isFrozen(shape));
    assert.equal(vectorShape(length), shape);
  }
});

Deno.test("vectorShape keeps a bounded number of long shapes, and still answers past the bound", () => {
  const first = vectorShape(10_000_000);
  for (let i = 0; i < 5000; i++) vectorShape(20_000_000 + i);
  assert.equal(vectorShape(10_000_000), first);
  const past = vectorShape(30_000_000);
  assert.deepEqual(past, [30_000_000]);
  assert.ok(Object.isFrozen(past));
});
