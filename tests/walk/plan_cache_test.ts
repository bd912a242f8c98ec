import assert from "node:assert/strict";
import {
  afterWalk,
  compiledWalks,
  disposeByPlan,
  forgetPlans,
  planFor,
  planStats,
  useCompiledWalks,
} from "../../src/walk/plan_cache.ts";
import { pairSink, recordingHooks } from "./_plan_hooks.ts";

const hooks = recordingHooks();

/** Records walks of `output` (as uncovered walks) until one compiles it; how many walks that took. */
function walkUntilCompiled(output: object): number {
  const before = planStats().compiled;
  let walks = 0;
  while (planStats().compiled === before) {
    if (++walks > 10_000) assert.fail("never compiled");
    afterWalk(undefined, output, hooks);
  }
  return walks;
}

Deno.test("planFor finds no plan for a primitive, or with nothing compiled", () => {
  forgetPlans();
  assert.equal(planFor({ a: 1 }), undefined);
  assert.equal(planFor(5), undefined);
  assert.equal(planFor(null), undefined);
  assert.equal(disposeByPlan({ a: 1 }, () => true), undefined);
});

Deno.test("a structure seen once is a candidate, not compiled; seen again, it is compiled", () => {
  forgetPlans();
  const before = planStats().compiled;
  afterWalk(undefined, { once: 1 }, hooks);
  assert.deepEqual(planStats(), {
    compiled: before,
    kept: 0,
    candidates: 1,
    lastPlanned: false,
    lastMisses: 0,
  });
  afterWalk(undefined, { once: 2 }, hooks);
  assert.equal(planStats().compiled, before + 1);
  assert.equal(planStats().kept, 1);
  assert.equal(planStats().candidates, 0);
  const plan = planFor({ once: 3 });
  assert.ok(plan !== undefined);
  assert.deepEqual(plan.run({ once: 4 }, [], pairSink), { once: 4 });
});

Deno.test("a leaf or primitive output is never a candidate", () => {
  forgetPlans();
  afterWalk(undefined, 5, hooks);
  afterWalk(undefined, new Float32Array(1), hooks);
  assert.equal(planStats().candidates, 0);
});

Deno.test("compiles back off: each compile makes the next repeated structure wait longer", () => {
  forgetPlans();
  const waits = [{ a: 1 }, { b: 1 }, { c: 1 }, { d: 1 }].map(walkUntilCompiled);
  // Second walk, second walk, then one and two more.
  assert.deepEqual(waits, [2, 2, 3, 4]);
});

Deno.test("a plan that pays off (64 covered walks) resets the compile wait", () => {
  forgetPlans();
  for (const output of [{ e: 1 }, { f: 1 }, { g: 1 }]) walkUntilCompiled(output);
  const plan = planFor({ g: 1 })!;
  for (let walk = 0; walk < 64; walk++) afterWalk(plan, { g: 1 }, hooks);
  assert.equal(plan.covered, 64);
  assert.deepEqual([planStats().lastPlanned, planStats().lastMisses], [true, 0]);
  assert.equal(walkUntilCompiled({ h: 1 }), 2);
});

Deno.test("a plan's walk with misses counts as uncovered", () => {
  forgetPlans();
  walkUntilCompiled({ m: 1 });
  const plan = planFor({ m: 1 })!;
  plan.misses = 2;
  afterWalk(plan, { m: 1 }, hooks);
  assert.equal(plan.covered, 0);
  assert.deepEqual([planStats().lastPlanned, planStats().lastMisses], [true, 2]);
});

Deno.test("at most four plans are kept, the most recently used first", () => {
  forgetPlans();
  const outputs = [{ p0: 1 }, { p1: 1 }, { p2: 1 }, { p3: 1 }];
  for (const output of outputs) walkUntilCompiled(output);
  // Using the oldest plan makes it the most recent: the next compile drops p1's.
  assert.ok(planFor({ p0: 1 }) !== undefined);
  walkUntilCompiled({ p4: 1 });
  assert.equal(planStats().kept, 4);
  assert.equal(planFor({ p1: 1 }), undefined);
  for (const key of ["p0", "p2", "p3", "p4"]) assert.ok(planFor({ [key]: 1 }), key);
});

Deno.test("with compiled walks off, no plan is found and nothing is looked at", () => {
  forgetPlans();
  walkUntilCompiled({ off: 1 });
  assert.equal(compiledWalks, true);
  useCompiledWalks(false);
  try {
    assert.equal(compiledWalks, false);
    assert.equal(planFor({ off: 1 }), undefined);
    afterWalk(undefined, { other: 1 }, hooks);
    assert.equal(planStats().candidates, 0);
  } finally {
    useCompiledWalks(true);
  }
  assert.ok(planFor({ off: 1 }) !== undefined, "what was compiled is kept");
});

Deno.test("disposeByPlan runs the matching plan's disposal and says whether it completed", () => {
  forgetPlans();
  walkUntilCompiled({ box: 1 });
  const unplanned = new Map();
  const handedOn: unknown[] = [];
  assert.equal(disposeByPlan({ box: unplanned }, (value) => handedOn.push(value) > 0), true);
  assert.deepEqual(handedOn, [unplanned]);
  assert.equal(disposeByPlan({ box: unplanned }, () => false), false);
});
