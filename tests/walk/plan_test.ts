import assert from "node:assert/strict";
import { forgetPlans, planStats } from "../../src/walk/plan_cache.ts";
import { visitByKeys } from "../../src/walk/containers.ts";
import { MAX_DEPTH, walk } from "../../src/walk/walk.ts";
import { planCodeStats } from "../../src/walk/plan_compiler.ts";
import { MAX_PLAN_DEPTH, MAX_PLAN_SIZE, MAX_PLAN_SOURCE, planOf } from "../../src/walk/plan.ts";
import { Tensor } from "../../src/tensor.ts";
import { arrayCodeOf, NO_CODE } from "../../src/array_code.ts";
import { disposeAll } from "../../src/dispose.ts";
import { createBatchMetaData, random } from "../../examples/reference_batch.ts";
import { countingCompiles, sparseArray } from "../_helpers.ts";

/** One stand-in tensor per TypedArray leaf, the same in every walk (as a copy's outputs are tensors). */
const standIns = new WeakMap<object, Tensor>();

/**
 * A walk whose sink puts a tensor in each leaf's place (the leaf itself, or
 * its stand-in): the output and the leaves with their data, in order.
 */
function record(input: unknown): { output: unknown; leaves: unknown[] } {
  const leaves: unknown[] = [];
  const output = walk(input, {
    add: (leaf, data) => {
      leaves.push(leaf, data);
      if (leaf instanceof Tensor) return leaf;
      let standIn = standIns.get(leaf);
      if (!standIn) standIns.set(leaf, standIn = Tensor.from(new Float32Array(1)));
      return standIn;
    },
  });
  return { output, leaves };
}

/** The generic walk of `input` (no plan is kept before it). */
function generic(input: unknown) {
  forgetPlans();
  return record(input);
}

/** The walk of `input` by the plan of `template` (walked twice before, which compiles it). */
function planned(template: unknown, input: unknown) {
  forgetPlans();
  record(template);
  record(template);
  return record(input);
}

/** The error message a walk of `input` throws. */
function errorOf(walkIt: () => unknown): string {
  try {
    walkIt();
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
  return "no error";
}

/** A short description of any value (null-prototype objects have no toString). */
function describe(value: unknown): string {
  if (typeof value !== "object" || value === null) return String(value);
  return Array.isArray(value) ? "an array" : Object.prototype.toString.call(value);
}

/** Asserts that two outputs have the same containers, keys in order, and the same other values. */
function assertSameOutput(a: unknown, b: unknown, path = "$"): void {
  if (typeof a !== "object" || a === null || typeof b !== "object" || b === null) {
    assert.ok(Object.is(a, b), `${path}: ${describe(a)} against ${describe(b)}`);
    return;
  }
  if (Array.isArray(a)) {
    assert.ok(Array.isArray(b), `${path}: an array against ${describe(b)}`);
    assert.equal(a.length, (b as unknown[]).length, `${path}.length`);
    a.forEach((value, i) => assertSameOutput(value, (b as unknown[])[i], `${path}[${i}]`));
    return;
  }
  if (a instanceof Map) {
    assert.ok(b instanceof Map, `${path}: a Map against ${describe(b)}`);
    assert.deepEqual([...a.keys()], [...b.keys()], `${path} keys`);
    for (const [key, value] of a) {
      assertSameOutput(value, b.get(key), `${path}.get(${String(key)})`);
    }
    return;
  }
  const proto = Object.getPrototypeOf(a);
  if (proto !== Object.prototype && proto !== null) {
    assert.equal(a, b, `${path}: passed through by reference`);
    return;
  }
  assert.equal(Object.getPrototypeOf(b), proto, `${path}: prototype`);
  assert.deepEqual(Object.keys(b), Object.keys(a), `${path}: keys in order`);
  for (const key of Object.keys(a)) {
    assertSameOutput(
      (a as Record<string, unknown>)[key],
      (b as Record<string, unknown>)[key],
      `${path}.${key}`,
    );
  }
}

/** Asserts that the planned walk of `input` (by `template`'s plan) is its generic walk. */
function assertPlannedIsGeneric(template: unknown, input: unknown, message?: string): void {
  const expected = generic(input);
  const actual = planned(template, input);
  assertSameOutput(actual.output, expected.output);
  assert.equal(actual.leaves.length, expected.leaves.length, message);
  actual.leaves.forEach((leaf, i) => assert.equal(leaf, expected.leaves[i], message));
}

Deno.test("a structure walked twice is compiled, and its next walk runs the plan without misses", () => {
  forgetPlans();
  const batch = createBatchMetaData(4);
  const before = planStats().compiled;
  record(batch);
  assert.equal(planStats().lastPlanned, false, "a one-off walk is generic");
  record(batch);
  assert.equal(planStats().compiled, before + 1);
  const { output } = record(batch);
  assert.deepEqual(
    { planned: planStats().lastPlanned, misses: planStats().lastMisses },
    { planned: true, misses: 0 },
  );
  assertSameOutput(output, generic(batch).output);
});

Deno.test("a plan covers batches of other lengths and other tensor sizes without misses", () => {
  const small = createBatchMetaData(2, 1);
  const large = createBatchMetaData(9, 7);
  assertPlannedIsGeneric(small, large);
  assert.deepEqual([planStats().lastPlanned, planStats().lastMisses], [true, 0]);
});

Deno.test("a structure that outgrew the plan run on it gets its own plan", () => {
  forgetPlans();
  const t = () => Tensor.from(new Float32Array(2));
  const lists = [[t(), t()], [t()]];
  record(lists);
  record(lists);
  // The plan of lists of leaves matches this root, but its leaves are now objects.
  const nested = [[{ a: t() }], [{ a: t() }, { a: t() }]];
  record(nested);
  assert.ok(planStats().lastPlanned && planStats().lastMisses > 0);
  // Compiled within a few walks (two uncovered in a row, then a wait that
  // grows while no compiled plan has covered a walk).
  let walks = 1;
  let output: unknown;
  while (!(planStats().lastPlanned && planStats().lastMisses === 0) && walks++ < 5) {
    output = record(nested).output;
  }
  assert.ok(walks <= 4, `${walks} walks`);
  assertSameOutput(output, generic(nested).output);
  // A root whose first element is an object is not run on a plan of leaves.
  forgetPlans();
  const flat = [t(), t()];
  record(flat);
  record(flat);
  record([{ a: t() }]);
  assert.equal(planStats().lastPlanned, false);
});

Deno.test("a value that no longer matches its node goes to the generic walk, with the generic result", () => {
  const leaf = () => Tensor.from(new Float32Array([1, 2]));
  const template = () => ({ items: [{ a: leaf(), b: 1 }, { a: leaf(), b: 2 }], meta: { n: 2 } });
  class Custom {
    a = leaf();
  }
  const changes: [string, (input: ReturnType<typeof template>) => unknown][] = [
    ["a key added", (x) => ((x.items[1] as Record<string, unknown>).c = leaf(), x)],
    ["a key removed", (x) => (delete (x.items[0] as Record<string, unknown>).b, x)],
    ["keys reordered", (x) => (x.items[0] = { b: 1, a: x.items[0].a }, x)],
    ["a null prototype", (x) => (x.items[0] = Object.assign(Object.create(null), x.items[0]), x)],
    ["a leaf now a number", (x) => ((x.items[0] as Record<string, unknown>).a = 3, x)],
    ["a leaf now an array", (x) => ((x.items[0] as Record<string, unknown>).a = [leaf()], x)],
    [
      "a leaf now a Map",
      (x) => ((x.items[0] as Record<string, unknown>).a = new Map([[1, leaf()]]), x),
    ],
    [
      "a leaf now a TypedArray",
      (x) => ((x.items[0] as Record<string, unknown>).a = new Int8Array(3), x),
    ],
    ["an object now a class instance", (x) => ((x.items as unknown[])[1] = new Custom(), x)],
    ["an object now an array", (x) => ((x as Record<string, unknown>).meta = [leaf()], x)],
    ["an array now an object", (x) => ((x as Record<string, unknown>).items = { 0: leaf() }, x)],
    ["a number now an object", (x) => ((x.meta as Record<string, unknown>).n = { t: leaf() }, x)],
    ["the root now an array", () => [leaf(), { a: leaf() }]],
    ["a frozen object", (x) => (Object.freeze(x.items[0]), x)],
  ];
  for (const [what, change] of changes) {
    assertPlannedIsGeneric(template(), change(template()), what);
  }
});

Deno.test("an enumerable key on Object.prototype makes objects miss, and the result keeps only own keys", () => {
  const input = { a: new Float32Array(1), b: [{ c: new Int32Array(2) }] };
  const template = { a: new Float32Array(1), b: [{ c: new Int32Array(2) }] };
  forgetPlans();
  record(template);
  record(template);
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.polluted = 1;
  try {
    const actual = record(input);
    // The root's own check already fails: no plan runs.
    assert.equal(planStats().lastPlanned, false);
    delete prototype.polluted;
    assertSameOutput(actual.output, generic(input).output);
  } finally {
    delete prototype.polluted;
  }
});

Deno.test("an inherited enumerable key never stands in for an own key of a plan's object", () => {
  const t = () => Tensor.from(new Float32Array(1));
  const object = (a: Tensor, b?: Tensor) => (b ? { a, b } : { a });
  // The object at the root, and past the check of a plan's first levels:
  // after an element that has its own `b`, under a null-prototype root.
  const shapes = [
    object,
    (a: Tensor, b?: Tensor) => [{ a: t(), b: t() }, object(a, b)],
    (a: Tensor, b?: Tensor) => Object.assign(Object.create(null), { rows: [object(a, b)] }),
  ];
  const inherited = t();
  for (const shape of shapes) {
    forgetPlans();
    record(shape(t(), t()));
    record(shape(t(), t()));
    Object.defineProperty(Object.prototype, "b", {
      value: inherited,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    try {
      const input = shape(t());
      const actual = record(input);
      disposeAll(shape(t()));
      assert.equal(inherited.disposed, false, "disposed by disposeAll");
      const expected = generic(input);
      assertSameOutput(actual.output, expected.output);
      assert.equal(actual.leaves.length, expected.leaves.length);
    } finally {
      delete (Object.prototype as Record<string, unknown>).b;
    }
  }
});

Deno.test("a getter that adds an enumerable key to Object.prototype midway never gets the inherited value copied", () => {
  const t = () => Tensor.from(new Float32Array(1));
  forgetPlans();
  record([{ a: t(), b: t() }, { a: t(), b: t() }]);
  record([{ a: t(), b: t() }, { a: t(), b: t() }]);
  const inherited = t();
  const polluting = {
    get a() {
      Object.defineProperty(Object.prototype, "b", {
        value: inherited,
        enumerable: true,
        writable: true,
        configurable: true,
      });
      return 1;
    },
    b: t(),
  };
  try {
    // The second object has only `a` of its own: a plan that took the
    // inherited `b` for its own would copy `inherited`.
    assert.throws(() => record([polluting, { a: t() }]), {
      name: "TypeError",
      message: /^Cannot copy a structure whose getters change Object\.prototype/,
    });
  } finally {
    delete (Object.prototype as Record<string, unknown>).b;
  }
});

Deno.test("a subtree shared by a planned and an unplanned position is no cycle", () => {
  const shared = { x: Tensor.from(new Float32Array(1)) };
  const template = { a: 1, b: { c: { d: 1 } } };
  const input = { a: shared, b: { c: { d: shared } } };
  assertPlannedIsGeneric(template, input);
  assert.equal(planStats().lastPlanned, true);
});

Deno.test("a long holey array in a planned position keeps its holes (the generic walk visits only its keys)", () => {
  const t = Tensor.from(new Float32Array(1));
  // Its prototype throws after 100 lookups through holes (a walk by index).
  const holey = sparseArray([[70_000, t]]);
  const { output } = planned({ rows: [t] }, { rows: holey });
  const rows = (output as { rows: unknown[] }).rows;
  assert.equal(rows.length, 70_001);
  assert.deepEqual(Object.keys(rows), ["70000"]);
});

Deno.test("planOf() stops at its size: containers plus keys past MAX_PLAN_SIZE are generic", () => {
  const t = Tensor.from(new Float32Array(1));
  // 64 distinct objects of 100 keys: 6464 units, past the size.
  const wide = Array.from(
    { length: 64 },
    (_, i) => Object.fromEntries(Array.from({ length: 100 }, (_, k) => [`o${i}k${k}`, t])),
  );
  const node = planOf(Object.fromEntries(wide.map((o, i) => [`w${i}`, o])), HOOKS);
  assert.ok(node.kind === "object");
  const kinds = node.values.map((value) => value.kind);
  const compiled = kinds.filter((kind) => kind === "object").length;
  assert.ok(compiled > 0 && compiled < 64, `${compiled} objects compiled`);
  assert.ok(1 + 64 + compiled * 101 <= MAX_PLAN_SIZE);
  assert.deepEqual(new Set(kinds.slice(compiled)), new Set(["generic"]));
});

Deno.test("planOf() makes a long holey array a generic node without reading its holes", () => {
  const t = Tensor.from(new Float32Array(1));
  // Its prototype throws after 100 lookups through holes.
  const node = planOf({ rows: sparseArray([[2 ** 31, t]]), t }, { ...HOOKS, visitByKeys });
  assert.equal(node.kind === "object" && node.values[0].kind, "generic");
});

Deno.test("errors in a planned walk name the path the generic walk names", () => {
  const template = () => ({ rows: [{ t: Tensor.from(new Float32Array(1)), x: [1] }] });
  const cyclic = template();
  (cyclic.rows[0].x as unknown[]).push(cyclic);
  const disposed = template();
  disposed.rows.push({ t: Tensor.from(new Float32Array(1)), x: [2] });
  disposed.rows[1].t.dispose();
  const detached = template();
  const buffer = new ArrayBuffer(8);
  (detached.rows[0] as Record<string, unknown>).t = new Float32Array(buffer);
  structuredClone(buffer, { transfer: [buffer] });
  const shrunk = template();
  const resizable = new ArrayBuffer(8, { maxByteLength: 16 });
  shrunk.rows[0].t = Tensor.from(new Float32Array(resizable));
  resizable.resize(4);
  let deep: unknown = new Float32Array(1);
  for (let i = 0; i < MAX_DEPTH + 5; i++) deep = [deep];
  const tooDeep = template();
  (tooDeep.rows[0] as Record<string, unknown>).x = deep;
  for (const input of [cyclic, disposed, detached, shrunk, tooDeep]) {
    const expected = errorOf(() => generic(input));
    assert.notEqual(expected, "no error");
    assert.equal(errorOf(() => planned(template(), input)), expected);
  }
});

Deno.test("a planned walk reads each value once, as the generic walk does", () => {
  let reads = 0;
  const make = () => ({
    get t() {
      reads++;
      return new Float32Array(1);
    },
    u: 1,
  });
  forgetPlans();
  record([make()]);
  record([make()]);
  reads = 0;
  record([make(), make()]);
  assert.equal(planStats().lastPlanned, true);
  assert.equal(reads, 2);
});

Deno.test("structures that change on every walk are never compiled; one that comes again is", () => {
  forgetPlans();
  const before = planStats().compiled;
  for (let i = 0; i < 200; i++) record({ [`key${i}`]: new Float32Array(1) });
  assert.equal(planStats().compiled - before, 0);
  assert.ok(planStats().candidates <= 4 && planStats().kept === 0);
  // Looks grew rarer (one per 16 uncovered walks at most); a repeated
  // structure is still compiled at its second look.
  const repeated = { again: new Float32Array(1) };
  let walks = 0;
  while (planStats().compiled === before && walks++ < 200) record(repeated);
  assert.ok(walks <= 2 * 16 + 2, `${walks} walks`);
});

Deno.test("walks of objects keyed per step compile nothing per step: compiles stay bounded", () => {
  forgetPlans();
  const batch = createBatchMetaData(4);
  const image = new Float32Array(4);
  const label = new Int32Array(1);
  const before = planStats().compiled;
  const compiles = countingCompiles(() => {
    for (let step = 0; step < 3000; step++) {
      record(batch);
      record({ [`img${step}`]: image, meta: { n: step } });
      record({ [`label${step}`]: label });
    }
  });
  // The batch's plan and the shapes of its objects, once; nothing per step.
  assert.ok(compiles.count <= 20, `${compiles.count} compiles in 3000 steps`);
  assert.ok(planStats().compiled - before <= 2, `${planStats().compiled - before} plans`);
  assert.ok(planStats().kept <= 4);
  record(batch);
  assert.deepEqual([planStats().lastPlanned, planStats().lastMisses], [true, 0]);
});

Deno.test("a structure that comes again twice in a row per step is compiled ever more rarely", () => {
  forgetPlans();
  const before = planStats().compiled;
  for (let step = 0; step < 3000; step++) {
    const input = { [`twice${step}`]: new Float32Array(1) };
    record(input);
    record(input);
  }
  const compiled = planStats().compiled - before;
  assert.ok(compiled >= 2 && compiled <= 20, `${compiled} plans compiled in 3000 steps`);
});

Deno.test("a very long key is never compiled: its object is copied generically", () => {
  const key = "k".repeat(1_000_000);
  const t = Tensor.from(new Float32Array(1));
  forgetPlans();
  const compiles = countingCompiles(() => {
    let output: unknown;
    for (let i = 0; i < 4; i++) output = record([{ [key]: t, a: 1 }, { [key]: t, a: 2 }]).output;
    return output;
  });
  assert.ok(compiles.sourceChars < 100_000, `${compiles.sourceChars} characters compiled`);
  const output = compiles.result as Record<string, unknown>[];
  assert.deepEqual(Object.keys(output[1]), [key, "a"]);
  assert.ok(output[1][key] instanceof Tensor);
});

Deno.test("a plan's code stays within MAX_PLAN_SOURCE however long its keys (the rest is generic)", () => {
  const t = Tensor.from(new Float32Array(1));
  // 40 objects of 100 keys of 256 characters (within MAX_PLAN_KEYS and the
  // key length bound): 4041 containers and keys, 1 MB of keys.
  const input = Object.fromEntries(
    Array.from({ length: 40 }, (_, o) => [
      `o${o}`,
      Object.fromEntries(
        Array.from({ length: 100 }, (_, k) => [`${o}_${k}_`.padEnd(256, "k"), t]),
      ),
    ]),
  );
  forgetPlans();
  const compiles = countingCompiles(() => {
    for (let i = 0; i < 3; i++) record(input);
  });
  assert.ok(compiles.longest <= MAX_PLAN_SOURCE, `${compiles.longest} characters in one function`);
  assertPlannedIsGeneric(input, input);
});

Deno.test("a structure compiled again reuses its plan's code", () => {
  const t = Tensor.from(new Float32Array(1));
  const input = { reused: [{ a: t }] };
  forgetPlans();
  record(input);
  record(input);
  const before = planCodeStats();
  forgetPlans();
  const compiles = countingCompiles(() => {
    record(input);
    record(input);
  });
  assert.equal(planStats().kept, 1);
  assert.equal(compiles.count, 0);
  assert.deepEqual(planCodeStats(), before);
});

/** What planOf needs of the hooks: tensors are leaves, no array is holey. */
const HOOKS = {
  leafClass: Tensor,
  visitByKeys: () => false,
  leafCode: arrayCodeOf,
  noCode: NO_CODE,
};

Deno.test("planOf() takes a TypedArray for a leaf, as it does a tensor (the output of a sink that leaves leaves as they are)", () => {
  const node = planOf([{ a: new Float32Array(2), b: Tensor.from(new Int8Array(1)) }], HOOKS);
  assert.deepEqual(node, {
    kind: "array",
    element: {
      kind: "object",
      keys: ["a", "b"],
      nullPrototype: false,
      values: [{ kind: "leaf" }, { kind: "leaf" }],
    },
  });
  assert.equal(planOf([new DataView(new ArrayBuffer(1))], HOOKS).kind, "array");
  assert.deepEqual(planOf([new DataView(new ArrayBuffer(1))], HOOKS), {
    kind: "array",
    element: { kind: "other" },
  });
});

Deno.test("planOf() merges array elements into one node and stops at the plan depth", () => {
  const t = Tensor.from(new Float32Array(1));
  assert.deepEqual(planOf([{ a: t }, { a: t }, {}], HOOKS).kind, "array");
  const node = planOf([{ a: t }, { a: 1 }], HOOKS);
  assert.equal(node.kind === "array" && node.element.kind, "object");
  const mixed = planOf([{ a: t }, [t]], HOOKS);
  assert.equal(mixed.kind === "array" && mixed.element.kind, "generic");
  const passed = planOf([new Date(), 1, null], HOOKS);
  assert.equal(passed.kind === "array" && passed.element.kind, "other");
  const maps = planOf({ m: new Map() }, HOOKS);
  assert.equal(maps.kind === "object" && maps.values[0].kind, "generic");
  let deep: unknown = t;
  for (let i = 0; i < MAX_PLAN_DEPTH + 3; i++) deep = [deep];
  let node2 = planOf(deep, HOOKS);
  let depth = 0;
  while (node2.kind === "array") node2 = node2.element, depth++;
  assert.equal(depth, MAX_PLAN_DEPTH);
  assert.equal(node2.kind, "generic");
});

Deno.test("random structures and random changes: a planned walk is always the generic walk", () => {
  const rand = random(7);
  const pick = <T>(items: T[]): T => items[Math.floor(rand() * items.length)];
  const KEYS = ["a", "b", "c", "d", "1", "__proto__"];
  const shared = new Date(0);
  class Box {
    v = new Float32Array(1);
  }
  const value = (depth: number): unknown => {
    const kind = depth > 3 ? pick([0, 1, 2, 3]) : pick([0, 1, 2, 3, 4, 5, 5, 6, 7]);
    switch (kind) {
      case 0:
        return pick([1, "s", null, undefined, true, shared, new Box()]);
      case 1:
        return Tensor.from(new Float32Array(1 + Math.floor(rand() * 3)));
      case 2:
        return new Int32Array(Math.floor(rand() * 3));
      case 3:
        return new Uint8Array(2);
      case 4:
        return new Map([[pick(KEYS), value(depth + 1)]]);
      case 5:
      case 6: {
        const keys = KEYS.filter(() => rand() < 0.5);
        const object = rand() < 0.2 ? Object.create(null) : {};
        for (const key of keys) {
          Object.defineProperty(object, key, {
            value: value(depth + 1),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return object;
      }
      default:
        return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
    }
  };
  // A copy with some values replaced (same containers where not replaced).
  const change = (input: unknown, depth: number): unknown => {
    if (rand() < 0.08) return value(depth);
    if (Array.isArray(input)) {
      const output = input.map((v) => change(v, depth + 1));
      if (rand() < 0.1) output.push(value(depth + 1));
      return output;
    }
    if (typeof input === "object" && input !== null && !(input instanceof Tensor)) {
      const proto = Object.getPrototypeOf(input);
      if (proto !== Object.prototype && proto !== null) return input;
      const output = Object.create(proto);
      for (const key of Object.keys(input)) {
        Object.defineProperty(output, key, {
          value: change((input as Record<string, unknown>)[key], depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return output;
    }
    return input;
  };
  let plannedWalks = 0;
  for (let round = 0; round < 400; round++) {
    const template = [value(0), value(0)];
    const input = rand() < 0.3 ? change(template, 0) : change(change(template, 0), 0);
    assertPlannedIsGeneric(template, input, `round ${round}`);
    if (planStats().lastPlanned) plannedWalks++;
  }
  assert.ok(plannedWalks > 200, `${plannedWalks} of 400 walks ran a plan`);
});
