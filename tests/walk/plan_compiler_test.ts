import assert from "node:assert/strict";
import { MAX_PLAN_SOURCE, type PlanNode } from "../../src/walk/plan.ts";
import { planSource } from "../../src/walk/plan_code.ts";
import { compilePlan, forgetPlanCode, planCodeStats } from "../../src/walk/plan_compiler.ts";
import { pairSink, recordingHooks } from "./_plan_hooks.ts";

const objectOf = (keys: string[]): PlanNode => ({
  kind: "object",
  keys,
  nullPrototype: false,
  values: keys.map(() => ({ kind: "leaf" })),
});

Deno.test("compilePlan: a structure compiled again reuses its code; the budget counts distinct code once", () => {
  forgetPlanCode();
  const node = objectOf(["compiler_reuse_a", "compiler_reuse_b"]);
  const first = compilePlan(node, recordingHooks())!;
  const after = planCodeStats();
  const length = planSource(node).source.length;
  assert.deepEqual(after, { distinct: 1, sourceChars: length });
  const second = compilePlan(objectOf(["compiler_reuse_a", "compiler_reuse_b"]), recordingHooks())!;
  assert.deepEqual(planCodeStats(), after);
  assert.notEqual(second, first, "each compile gives a plan of its own (its own counters)");
  compilePlan(objectOf(["compiler_reuse_c"]), recordingHooks());
  assert.equal(planCodeStats().distinct, 2);
});

Deno.test("compilePlan: plans sharing code keep their own hooks and counters", () => {
  forgetPlanCode();
  const node = objectOf(["shared"]);
  const hooksA = recordingHooks(), hooksB = recordingHooks();
  const a = compilePlan(node, hooksA)!, b = compilePlan(node, hooksB)!;
  a.run("not an object", [], pairSink);
  assert.equal(a.misses, 1);
  assert.equal(b.misses, 0);
  assert.equal(hooksA.visited.length, 1);
  assert.equal(hooksB.visited.length, 0);
});

Deno.test("compilePlan: a plan's matchesRoot is the root check of its node", () => {
  const plan = compilePlan(objectOf(["x"]), recordingHooks())!;
  assert.equal(plan.matchesRoot({ x: 1 }), true);
  assert.equal(plan.matchesRoot({ y: 1 }), false);
  assert.deepEqual([plan.misses, plan.covered], [0, 0]);
});

Deno.test("compilePlan: code longer than MAX_PLAN_SOURCE is not compiled, and costs no budget", () => {
  forgetPlanCode();
  // Hand-made nodes (planOf would not make keys this long): each key is
  // written into the code several times.
  const keyLength = 100_000;
  const count = Math.ceil(MAX_PLAN_SOURCE / keyLength / 2);
  const node = objectOf(Array.from({ length: count }, (_, i) => `${i}`.padEnd(keyLength, "k")));
  assert.ok(planSource(node).source.length > MAX_PLAN_SOURCE);
  assert.equal(compilePlan(node, recordingHooks()), undefined);
  assert.deepEqual(planCodeStats(), { distinct: 0, sourceChars: 0 });
});

Deno.test("forgetPlanCode forgets the code kept and the budget spent", () => {
  compilePlan(objectOf(["forget_me"]), recordingHooks());
  assert.ok(planCodeStats().distinct > 0);
  forgetPlanCode();
  assert.deepEqual(planCodeStats(), { distinct: 0, sourceChars: 0 });
});
