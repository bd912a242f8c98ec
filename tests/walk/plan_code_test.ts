import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import type { PlanNode } from "../../src/walk/plan.ts";
import { planSource } from "../../src/walk/plan_code.ts";
import { compilePlan } from "../../src/walk/plan_compiler.ts";
import { pairSink, recordingHooks } from "./_plan_hooks.ts";
import { NOT_TAKEN } from "../../src/walk/leaf_sink.ts";

const LEAF: PlanNode = { kind: "leaf" };
const OTHER: PlanNode = { kind: "other" };
const object = (entries: [string, PlanNode][], nullPrototype = false): PlanNode => ({
  kind: "object",
  keys: entries.map(([key]) => key),
  nullPrototype,
  values: entries.map(([, node]) => node),
});

Deno.test("planSource: the same plan gives the same code (so compiled code can be kept by its source)", () => {
  const plan = () => object([["a", { kind: "array", element: LEAF }], ["b", OTHER]]);
  assert.deepEqual(planSource(plan()), planSource(plan()));
});

Deno.test("planSource: each object node's keys are a key list K0, K1, ... in the order they are emitted", () => {
  const { source, keyLists } = planSource(object([["outer", object([["inner", LEAF]])]]));
  // The walk checks both objects (`run`, then `runPacked`), then the disposal checks both again.
  assert.deepEqual(keyLists, [
    ["outer"],
    ["inner"],
    ["outer"],
    ["inner"],
    ["outer"],
    ["inner"],
  ]);
  for (let k = 0; k < keyLists.length; k++) assert.match(source, new RegExp(`K${k}\\[`));
});

Deno.test("planSource: keys are string literals in the code, never code (a hostile key compiles and reads as itself)", () => {
  const hostile = `"]; throw new Error("injected"); //`;
  const plan = compilePlan(object([[hostile, LEAF], ["\u2028", OTHER]]), recordingHooks())!;
  const leaf = new Float32Array(1);
  const out = plan.run({ [hostile]: leaf, "\u2028": 7 }, [], pairSink);
  assert.deepEqual(out, { [hostile]: [leaf, leaf], "\u2028": 7 });
  assert.equal(plan.misses, 0);
});

Deno.test("a plan's run builds the output of a matching structure without the generic walk", () => {
  const hooks = recordingHooks();
  const plan = compilePlan(
    object([["list", { kind: "array", element: LEAF }], ["n", OTHER]]),
    hooks,
  )!;
  const a = new Float32Array(1), b = new Int8Array(2);
  const tensor = Tensor.from(new Float32Array(1), [1]);
  try {
    const out = plan.run({ list: [a, tensor, b], n: 3 }, [], pairSink);
    assert.deepEqual(out, { list: [[a, a], [tensor, "tensor data"], [b, b]], n: 3 });
    assert.deepEqual(hooks.visited, []);
    assert.equal(plan.misses, 0);
  } finally {
    tensor.dispose();
  }
});

Deno.test("a plan's run hands what does not match to the generic walk, counting misses", () => {
  const hooks = recordingHooks();
  const plan = compilePlan(object([["x", LEAF], ["y", OTHER]]), hooks)!;
  const different = { y: 1, x: 2 };
  assert.equal(plan.run(different, [], pairSink), "generic");
  assert.deepEqual(hooks.visited, [[different, 0]]);
  assert.equal(plan.misses, 1);
  // A container in a leaf's or other's place: a miss, walked generically one level down.
  const grown = { x: [new Float32Array(1)], y: { more: 1 } };
  assert.deepEqual(plan.run(grown, [], pairSink), { x: "generic", y: "generic" });
  assert.equal(plan.misses, 3);
  assert.deepEqual(hooks.visited.slice(1), [[grown.x, 1], [grown.y, 1]]);
});

Deno.test("a plan's run passes primitives and empty TypedArrays (which may be detached) on as the generic walk would", () => {
  const hooks = recordingHooks();
  const plan = compilePlan({ kind: "array", element: LEAF }, hooks)!;
  const empty = new Float32Array(0);
  assert.deepEqual(plan.run([null, 5, "s", empty], [], pairSink), [null, 5, "s", "generic"]);
  assert.deepEqual(hooks.visited, [[empty, 1]]);
});

Deno.test("a plan's run sends a disposed tensor to the generic walk (which rejects it)", () => {
  const hooks = recordingHooks();
  const plan = compilePlan({ kind: "array", element: LEAF }, hooks)!;
  const tensor = Tensor.from(new Float32Array(1), [1]);
  tensor.dispose();
  assert.deepEqual(plan.run([tensor], [], pairSink), ["generic"]);
  assert.deepEqual(hooks.visited, [[tensor, 1]]);
});

Deno.test("a plan's run builds null-prototype objects for a null-prototype node, and rejects the other prototype", () => {
  const hooks = recordingHooks();
  const plan = compilePlan(object([["k", OTHER]], true), hooks)!;
  const out = plan.run(Object.assign(Object.create(null), { k: 1 }), [], pairSink) as object;
  assert.equal(Object.getPrototypeOf(out), null);
  assert.deepEqual({ ...out }, { k: 1 });
  assert.equal(plan.run({ k: 1 }, [], pairSink), "generic");
  assert.equal(plan.misses, 1);
});

Deno.test("a plan's run throws where Object.prototype gains an enumerable key during the run", () => {
  const plan = compilePlan(object([["a", OTHER]]), recordingHooks())!;
  const root = {
    get a() {
      (Object.prototype as Record<string, unknown>).planCodeAdded = 1;
      return 1;
    },
  };
  try {
    assert.throws(() => plan.run(root, [], pairSink), {
      name: "TypeError",
      message: /^Cannot copy a structure whose getters change Object\.prototype/,
    });
  } finally {
    delete (Object.prototype as Record<string, unknown>).planCodeAdded;
  }
});

Deno.test("a plan's dispose disposes each tensor of a matching structure and hands the rest on", () => {
  const plan = compilePlan(
    object([["t", LEAF], ["list", { kind: "array", element: LEAF }], ["o", OTHER]]),
    recordingHooks(),
  )!;
  const t = Tensor.from(new Float32Array(1), [1]);
  const u = Tensor.from(new Float32Array(1), [1]);
  const rest: unknown[] = [];
  const other = { unplanned: 1 };
  const plain = new Float32Array(1);
  assert.equal(
    plan.dispose({ t, list: [u, plain], o: other }, [], (value) => rest.push(value) > 0),
    true,
  );
  assert.equal(t.disposed, true);
  assert.equal(u.disposed, true);
  assert.deepEqual(rest, [plain, other]);
});

Deno.test("a plan's dispose returns false when the generic disposal gives up", () => {
  const plan = compilePlan({ kind: "array", element: OTHER }, recordingHooks())!;
  assert.equal(plan.dispose([{}], [], () => false), false);
  assert.equal(plan.dispose([1, 2], [], () => false), true);
});

Deno.test("a plan hands an object that claims every key (a proxy's has trap) to the generic walk and disposal", () => {
  const hooks = recordingHooks();
  const plan = compilePlan(object([["k", LEAF]]), hooks)!;
  const tensor = Tensor.from(new Float32Array(1), [1]);
  try {
    // Its keys and prototype are a plain object's; only `in` answers differ.
    const claiming = new Proxy({ k: tensor }, { has: () => true });
    assert.equal(plan.run(claiming, [], pairSink), "generic");
    assert.deepEqual(hooks.visited, [[claiming, 0]]);
    assert.equal(plan.misses, 1);
    const rest: unknown[] = [];
    assert.equal(plan.dispose(claiming, [], (value) => rest.push(value) > 0), true);
    assert.deepEqual(rest, [claiming]);
    assert.equal(tensor.disposed, false);
    // The same object without the proxy takes the plan.
    assert.deepEqual(plan.run({ k: tensor }, [], pairSink), { k: [tensor, "tensor data"] });
    assert.equal(plan.misses, 1);
  } finally {
    tensor.dispose();
  }
});

Deno.test("a plan reads a proxy that throws on keys it does not know (a strict get trap) by its keys only, as the generic walk does", () => {
  const plan = compilePlan(object([["k", LEAF], ["n", OTHER]]), recordingHooks())!;
  const leaf = new Float32Array(2);
  const read: PropertyKey[] = [];
  const strict = new Proxy({ k: leaf, n: 3 }, {
    get(target, key) {
      read.push(key);
      if (!(key in target)) throw new Error(`unknown key ${String(key)}`);
      return Reflect.get(target, key);
    },
  });
  assert.deepEqual(plan.run(strict, [], pairSink), { k: [leaf, leaf], n: 3 });
  assert.deepEqual(read, ["k", "n"]);
  assert.equal(plan.misses, 0);
  assert.equal(plan.dispose(strict, [], () => true), true);
});

Deno.test("a plan's getters are read once each, the probe of its objects reading none", () => {
  const plan = compilePlan(
    object([["a", OTHER], ["b", object([["c", OTHER]])]]),
    recordingHooks(),
  )!;
  let reads = 0;
  const inner = {
    get c() {
      return ++reads;
    },
  };
  const root = {
    get a() {
      return ++reads;
    },
    b: inner,
  };
  assert.deepEqual(plan.run(root, [], pairSink), { a: 1, b: { c: 2 } });
  assert.equal(reads, 2);
  assert.equal(plan.dispose(root, [], () => true), true);
  assert.equal(reads, 4);
  assert.equal(plan.misses, 0);
});

Deno.test("a plan's runPacked offers each leaf to the sink's packed walk first, and gives what it declines to add", () => {
  const plan = compilePlan(
    object([["list", { kind: "array", element: LEAF }], ["t", LEAF], ["n", OTHER]]),
    recordingHooks(),
  )!;
  const offered: unknown[] = [];
  const sink = {
    ...pairSink,
    packedWalk: {
      // Takes arrays of odd length and no tensor.
      array: (leaf: ArrayBufferView & { length: number }) => {
        offered.push(leaf);
        return leaf.length % 2 === 1 ? "taken" : NOT_TAKEN;
      },
      tensor: (leaf: unknown) => {
        offered.push(leaf);
        return NOT_TAKEN;
      },
    },
  };
  const a = new Float32Array(1), b = new Int8Array(2), tensor = Tensor.from(new Float32Array(1));
  const input = { list: [a, b], t: tensor, n: 3 };
  assert.deepEqual(plan.runPacked(input, [], sink), {
    list: ["taken", [b, b]],
    t: [tensor, "tensor data"],
    n: 3,
  });
  assert.deepEqual(offered, [a, b, tensor]);
  // `run` offers nothing: the same input as the plain walk gives it.
  offered.length = 0;
  assert.deepEqual(plan.run(input, [], sink), {
    list: [[a, a], [b, b]],
    t: [tensor, "tensor data"],
    n: 3,
  });
  assert.deepEqual(offered, []);
});
