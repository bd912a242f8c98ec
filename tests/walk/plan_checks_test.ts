import assert from "node:assert/strict";
import type { CompiledPlan, PlanNode } from "../../src/walk/plan.ts";
import {
  inheritedKeysAdded,
  noInheritedKeys,
  rootCheck,
  visitCounting,
  visitCountingLeaves,
} from "../../src/walk/plan_checks.ts";
import { walk } from "../../src/walk/walk.ts";
import { resetCompiledWalks } from "../../src/walk/plan_cache.ts";
import { arrayCodeOf, NO_CODE } from "../../src/array_code.ts";
import { NOT_TAKEN } from "../../src/walk/leaf_sink.ts";
import { Tensor } from "../../mod.ts";

const LEAF: PlanNode = { kind: "leaf" };
const OTHER: PlanNode = { kind: "other" };
const objectNode = (keys: string[], nullPrototype = false): PlanNode => ({
  kind: "object",
  keys,
  nullPrototype,
  values: keys.map(() => LEAF),
});

Deno.test("noInheritedKeys is false exactly while Object.prototype has an enumerable key", () => {
  assert.equal(noInheritedKeys(), true);
  const proto = Object.prototype as Record<string, unknown>;
  proto.planChecksTestKey = 1;
  try {
    assert.equal(noInheritedKeys(), false);
  } finally {
    delete proto.planChecksTestKey;
  }
  Object.defineProperty(Object.prototype, "planChecksHidden", { value: 1, configurable: true });
  try {
    assert.equal(noInheritedKeys(), true);
  } finally {
    delete proto.planChecksHidden;
  }
});

Deno.test("inheritedKeysAdded throws a TypeError in the Cannot … grammar", () => {
  assert.throws(() => inheritedKeysAdded(), {
    name: "TypeError",
    message: /^Cannot copy a structure whose getters change Object\.prototype/,
  });
});

Deno.test("visitCounting counts a miss for arrays and plain objects only, and returns the walk's result", () => {
  const seen: unknown[] = [];
  const visit = (value: unknown, depth: number, _ancestors: object[], sink: unknown) => {
    seen.push([value, depth, sink]);
    return "walked";
  };
  const plan = { misses: 0 } as CompiledPlan;
  const counting = visitCounting(visit);
  const array: unknown[] = [];
  assert.equal(counting(array, 2, [], "sink", plan), "walked");
  assert.equal(plan.misses, 1);
  counting({}, 0, [], "sink", plan);
  counting(Object.create(null), 0, [], "sink", plan);
  assert.equal(plan.misses, 3);
  counting(new Map(), 0, [], "sink", plan);
  counting(new Float32Array(1), 0, [], "sink", plan);
  counting(new (class Box {})(), 0, [], "sink", plan);
  assert.equal(plan.misses, 3);
  assert.equal(seen.length, 6);
  assert.deepEqual(seen[0], [array, 2, "sink"]);
});

Deno.test("rootCheck: an array plan matches arrays whose first element matches, and empty arrays", () => {
  const check = rootCheck({ kind: "array", element: objectNode(["x"]) });
  assert.equal(check([{ x: 1 }, "anything after"]), true);
  assert.equal(check([]), true);
  assert.equal(check([{ y: 1 }]), false);
  assert.equal(check({ x: 1 }), false);
  assert.equal(check(null), false);
});

Deno.test("rootCheck: an object plan matches its keys in order, and its prototype", () => {
  const check = rootCheck(objectNode(["a", "b"]));
  assert.equal(check({ a: 1, b: 2 }), true);
  assert.equal(check({ b: 2, a: 1 }), false);
  assert.equal(check({ a: 1 }), false);
  assert.equal(check({ a: 1, b: 2, c: 3 }), false);
  const nullProto = Object.assign(Object.create(null), { a: 1, b: 2 });
  assert.equal(check(nullProto), false);
  assert.equal(rootCheck(objectNode(["a", "b"], true))(nullProto), true);
  assert.equal(check(new Map()), false);
  assert.equal(check(undefined), false);
});

Deno.test("rootCheck: an object plan does not match an object whose last key is inherited", () => {
  const check = rootCheck(objectNode(["a", "b"]));
  const proto = Object.prototype as Record<string, unknown>;
  proto.b = 0;
  try {
    assert.equal(check({ a: 1 }), false);
  } finally {
    delete proto.b;
  }
});

Deno.test("rootCheck: at the second level a leaf's place takes anything but arrays and plain objects", () => {
  const check = rootCheck({ kind: "array", element: LEAF });
  assert.equal(check([new Float32Array(1)]), true);
  assert.equal(check([5]), true);
  assert.equal(check([null]), true);
  assert.equal(check([new Map()]), true);
  assert.equal(check([[]]), false);
  assert.equal(check([{}]), false);
  assert.equal(check([Object.create(null)]), false);
  assert.equal(rootCheck({ kind: "array", element: OTHER })([[]]), true);
});

Deno.test("rootCheck: a plan whose root is not a container matches nothing", () => {
  for (const root of [LEAF, OTHER, { kind: "generic" } as PlanNode]) {
    assert.equal(rootCheck(root)(new Float32Array(1)), false);
    assert.equal(rootCheck(root)(5), false);
  }
});

Deno.test("visitCountingLeaves counts a leaf where the plan saw none as a miss, as it does a container", () => {
  const plan = { misses: 0 } as CompiledPlan;
  const visit = visitCountingLeaves((value) => value, {
    leafClass: Tensor,
    leafCode: arrayCodeOf,
    noCode: NO_CODE,
  });
  for (
    const value of [new Float32Array(2), new Uint8Array(0), Tensor.from(new Int8Array(1)), [], {}]
  ) {
    visit(value, 0, [], undefined, plan);
  }
  assert.equal(plan.misses, 5);
  for (const value of [new DataView(new ArrayBuffer(1)), new Date(), new Map()]) {
    visit(value, 0, [], undefined, plan);
  }
  assert.equal(plan.misses, 5);
});

Deno.test("a plan made from an output with no tensors at the leaves gives way to one that offers them to the packed walk", () => {
  resetCompiledWalks();
  const batch = () => [{ a: new Float32Array(3), b: [new Int32Array(2), new Uint8Array(4)] }];
  // A walk whose sink puts numbers at the leaves (as collectLeaves's
  // does): its output's structure is compiled with no leaf there.
  for (let i = 0; i < 6; i++) walk(batch(), { add: () => 1 });
  let offered = 0;
  const taker = {
    // Tensors where the leaves were, as a copy's route puts.
    add: (leaf: unknown) => Tensor.from(leaf as Float32Array),
    packedWalk: {
      begin: () => true,
      array: () => (offered++, NOT_TAKEN),
      tensor: () => NOT_TAKEN,
    },
  };
  for (let i = 0; i < 20; i++) walk(batch(), taker);
  // Without counting those leaves as misses, the first plan ran every walk
  // and offered nothing.
  assert.ok(offered > 0, "the leaves reached the packed walk");
  resetCompiledWalks();
});
