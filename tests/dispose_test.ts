import assert from "node:assert/strict";
import { disposeAll, Tensor } from "../mod.ts";

Deno.test("disposeAll() disposes every tensor in arrays, objects and Maps", () => {
  const tensors = [1, 2, 3, 4].map((n) => Tensor.from(new Float32Array(n)));
  const cyclic: Record<string, unknown> = {
    a: [tensors[0], { b: tensors[1] }],
    m: new Map([["k", tensors[2]]]),
  };
  cyclic.self = cyclic;
  disposeAll(cyclic);
  assert.deepEqual(tensors.map((t) => t.disposed), [true, true, true, false]);
  disposeAll(tensors[3]);
  assert.equal(tensors[3].disposed, true);
});

Deno.test("disposeAll() leaves other values alone", () => {
  const data = new Float32Array(2);
  disposeAll({ data, n: 1, s: "x", d: new Date() });
  assert.equal(data.length, 2);
});

Deno.test("disposeAll() reaches tensors nested deeper than the walk's depth limit", async () => {
  const { MAX_DEPTH } = await import("../src/traverse.ts");
  const tensor = Tensor.from(new Float32Array(1));
  let deep: unknown = [tensor];
  for (let i = 0; i < MAX_DEPTH + 10; i++) deep = { next: deep };
  disposeAll(deep);
  assert.equal(tensor.disposed, true);
});
