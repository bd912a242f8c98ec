import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { collectLeaves } from "../../src/walk/collect_leaves.ts";
import { planStats, resetCompiledWalks } from "../../src/walk/plan_cache.ts";

Deno.test("collectLeaves lists TypedArray and Tensor leaves in walk order, nothing else", () => {
  const a = new Float32Array(2);
  const b = Tensor.from(new Int32Array(3), [3]);
  const c = new Uint8Array(1);
  try {
    assert.deepEqual(collectLeaves([a, 5, "s", null, { b, d: [c] }]), [a, b, c]);
    assert.deepEqual(collectLeaves({ none: [1, 2] }), []);
  } finally {
    b.dispose();
  }
});

Deno.test("collectLeaves gives the leaves themselves, Map values and repeats included", () => {
  const shared = new Float64Array(1);
  const other = new Int8Array(2);
  const leaves = collectLeaves(new Map<string, unknown>([["x", shared], ["y", [shared, other]]]));
  assert.equal(leaves.length, 3);
  assert.equal(leaves[0], shared);
  assert.equal(leaves[1], shared);
  assert.equal(leaves[2], other);
});

Deno.test("collectLeaves rejects what the walk rejects, with the walk's errors", () => {
  const cyclic: unknown[] = [new Float32Array(1)];
  cyclic.push(cyclic);
  assert.throws(() => collectLeaves(cyclic), { name: "TypeError", message: /cyclic/ });
  const detached = new Float32Array(4);
  detached.buffer.transfer();
  assert.throws(() => collectLeaves({ x: [detached] }), { name: "TypeError", message: /x\[0\]/ });
});

Deno.test("collectLeaves of a repeated structure compiles its plan once, and the plan covers every walk after it", () => {
  resetCompiledWalks();
  const batch = [{
    a: new Float32Array(2),
    b: [new Int8Array(1), Tensor.from(new Uint16Array(3))],
  }];
  for (let i = 0; i < 10; i++) collectLeaves(batch);
  const compiled = planStats().compiled;
  for (let i = 0; i < 200; i++) {
    assert.equal(collectLeaves(batch).length, 3);
    assert.ok(planStats().lastPlanned, `walk ${i} ran the plan`);
    assert.equal(planStats().lastMisses, 0, `walk ${i} missed nothing`);
  }
  // Before, its sink put numbers where the leaves were: each walk missed,
  // and the structure was compiled again and again.
  assert.equal(planStats().compiled, compiled);
  resetCompiledWalks();
});
