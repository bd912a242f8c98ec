import assert from "node:assert/strict";
import { disposeAll, startCopy, Tensor } from "../mod.ts";
import { BlockPool } from "../src/memory/block_pool.ts";
import { Storage } from "../src/memory/storage.ts";
import { tensorInternals } from "../src/tensor.ts";
import { TensorLayout } from "../src/tensor_layout.ts";
import { vectorShape } from "../src/vector_shape.ts";
import { forgetPlans, planStats } from "../src/walk/plan_cache.ts";
import { walk } from "../src/walk/walk.ts";
import { sparseArray } from "./_helpers.ts";

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
  const { MAX_DEPTH } = await import("../src/walk/walk.ts");
  const tensor = Tensor.from(new Float32Array(1));
  let deep: unknown = [tensor];
  for (let i = 0; i < MAX_DEPTH + 10; i++) deep = { next: deep };
  disposeAll(deep);
  assert.equal(tensor.disposed, true);
});

/** Every tensor reachable through arrays, plain objects and Maps, and those kept inside other objects. */
function tensorsIn(value: unknown): { reachable: Tensor[]; inside: Tensor[] } {
  const reachable: Tensor[] = [];
  const inside: Tensor[] = [];
  const seen = new Set<unknown>();
  const visit = (item: unknown, wrapped: boolean) => {
    if (typeof item !== "object" || item === null || seen.has(item)) return;
    seen.add(item);
    if (item instanceof Tensor) return void (wrapped ? inside : reachable).push(item);
    const proto = Object.getPrototypeOf(item);
    const container = Array.isArray(item) || item instanceof Map || proto === Object.prototype ||
      proto === null;
    const values = item instanceof Map ? [...item.values()] : Object.values(item);
    for (const child of values) visit(child, wrapped || !container);
  };
  visit(value, false);
  return { reachable, inside };
}

Deno.test("disposeAll() by a compiled plan disposes what the generic disposal does, whatever changed", async () => {
  const { random } = await import("../examples/reference_batch.ts");
  const rand = random(11);
  const pick = <T>(items: T[]): T => items[Math.floor(rand() * items.length)];
  class Holder {
    constructor(readonly t: Tensor) {}
  }
  const t = () => Tensor.from(new Float32Array(1));
  const value = (depth: number): unknown => {
    switch (depth > 3 ? pick([0, 1]) : pick([0, 1, 1, 2, 3, 3, 4, 5])) {
      case 0:
        return pick([1, null, "s", new Holder(t())]);
      case 1:
        return t();
      case 2:
        return new Map([["k", value(depth + 1)]]);
      case 3: {
        const object: Record<string, unknown> = rand() < 0.2 ? Object.create(null) : {};
        for (const key of ["a", "b", "c"]) if (rand() < 0.6) object[key] = value(depth + 1);
        return object;
      }
      default:
        return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
    }
  };
  // The same containers with some values replaced, and fresh tensors.
  const change = (item: unknown, depth: number): unknown => {
    if (rand() < 0.1) return value(depth);
    if (item instanceof Tensor) return t();
    if (Array.isArray(item)) return item.map((child) => change(child, depth + 1));
    if (item instanceof Map) return new Map([...item].map(([k, v]) => [k, change(v, depth + 1)]));
    if (typeof item === "object" && item !== null && !(item instanceof Holder)) {
      const copy = Object.create(Object.getPrototypeOf(item));
      for (const [k, v] of Object.entries(item)) copy[k] = change(v, depth + 1);
      return copy;
    }
    return item;
  };
  const sink = { add: (leaf: unknown) => leaf };
  let planned = 0;
  for (let round = 0; round < 300; round++) {
    const template = [value(0), value(0)];
    forgetPlans();
    walk(template, sink);
    walk(template, sink);
    // The same structure, or one changed in places.
    const input = rand() < 0.2 ? template : change(template, 0);
    if (rand() < 0.2 && Array.isArray(input)) input.push(input); // a cycle
    const { reachable, inside } = tensorsIn(input);
    if (planStats().kept > 0) planned++;
    disposeAll(input);
    reachable.forEach((tensor, i) => assert.ok(tensor.disposed, `round ${round}: tensor ${i}`));
    inside.forEach((tensor) =>
      assert.ok(!tensor.disposed, `round ${round}: kept inside an object`)
    );
  }
  assert.ok(planned > 200, `${planned} of 300 rounds had a plan`);
});

Deno.test("disposeAll() by a compiled plan hands every value that changed kind to the generic disposal", () => {
  const t = () => Tensor.from(new Float32Array(1));
  const template =
    () => [{ a: t(), b: [t(), t()], c: { d: t() } }, { a: t(), b: [t()], c: { d: t() } }];
  const changes: ((x: ReturnType<typeof template>) => unknown)[] = [
    (x) => ((x[0] as Record<string, unknown>).a = [t(), { e: t() }], x),
    (x) => ((x[0] as Record<string, unknown>).b = { e: t() }, x),
    (x) => ((x[0] as Record<string, unknown>).c = [t()], x),
    (x) => ((x[0] as Record<string, unknown>).c = new Map([["m", t()]]), x),
    (x) => ((x[1] as Record<string, unknown>).extra = t(), x),
    (x) => ((x[1].b as unknown[]).push([t(), [t()]]), x),
  ];
  for (const [i, change] of changes.entries()) {
    const shape = template();
    forgetPlans();
    walk(shape, { add: (leaf) => leaf });
    walk(shape, { add: (leaf) => leaf });
    const input = change(template());
    const { reachable } = tensorsIn(input);
    disposeAll(input);
    reachable.forEach((tensor, k) => assert.ok(tensor.disposed, `change ${i}: tensor ${k}`));
  }
});

Deno.test("disposeAll() visits a sparse array by its elements, not by its length", () => {
  const tensors = [Tensor.from(new Float32Array(1)), Tensor.from(new Int8Array(2))];
  disposeAll({ rows: sparseArray([[5, tensors[0]], [2 ** 31, tensors[1]]]) });
  assert.deepEqual(tensors.map((t) => t.disposed), [true, true]);
  // Also where the generic disposal is the fallback of the deep walk.
  const deepTensor = Tensor.from(new Float32Array(1));
  let deep: unknown = sparseArray([[2 ** 30, deepTensor]]);
  for (let i = 0; i < 2100; i++) deep = { next: deep };
  disposeAll(deep);
  assert.equal(deepTensor.disposed, true);
});

Deno.test("disposeAll() of a copy's result never disposes the caller's tensors, copy after copy", async () => {
  // The same batch copied step after step (a dataset's second epoch), its
  // results disposed each time: generic disposal first, then by its plan.
  const boxes = Tensor.from(new Float32Array([1, 2, 3, 4]), [1, 4]);
  const batch = [{ boxes, ids: new Int32Array([5]), nested: { again: boxes } }];
  for (let step = 0; step < 4; step++) {
    const result = await startCopy(batch, "cpu").get();
    assert.notEqual(result[0].boxes, boxes);
    assert.notEqual(result[0].nested.again, boxes);
    disposeAll(result);
    assert.equal(result[0].boxes.disposed, true);
    assert.equal(boxes.disposed, false, `step ${step}`);
  }
  assert.deepEqual([...boxes.toTypedArray()], [1, 2, 3, 4]);
});

Deno.test("disposeAll() disposes a long holey array's elements, not its named properties, as for a dense array", () => {
  for (const name of ["", "-1", "1e3", "0x10", "x"]) {
    const element = Tensor.from(new Float32Array(1));
    const named = Tensor.from(new Float32Array(1));
    const holey: unknown[] = [];
    holey[70_000] = element;
    (holey as unknown as Record<string, unknown>)[name] = named;
    const dense = [element];
    (dense as unknown as Record<string, unknown>)[name] = named;
    disposeAll(dense);
    disposeAll({ rows: holey });
    assert.deepEqual([element.disposed, named.disposed], [true, false], JSON.stringify(name));
  }
});

/** A pool over made-up addresses; `free` is its allocator's. */
function madeUpPool(free: () => void = () => {}, limitBytes?: () => number): BlockPool {
  let next = 1 << 20;
  return new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free }, { limitBytes });
}

/** `count` float32 tensors of one element bound to `storage`, 16 bytes apart. */
function boundTo(storage: Storage, count: number): Tensor[] {
  const layout = new TensorLayout("float32", vectorShape(1), 4, 0);
  return Array.from(
    { length: count },
    (_, i) => tensorInternals.createBound(layout, storage, 16 * i),
  );
}

/** Tensors bound to two made-up storages: `count` in `a`, one of which shares its hold with `extra`. */
function boundTensors(count: number) {
  const pool = madeUpPool();
  const a = new Storage(pool, pool.acquire(4096), count);
  const b = new Storage(pool, pool.acquire(4096), 2);
  const inA = boundTo(a, count);
  const inB = boundTo(b, 2);
  // Another tensor over a's memory, with its own hold.
  const extra = tensorInternals.share(inA[0]);
  return { pool, a, b, inA, inB, extra };
}

/** Walks `value` twice, so that its structure gets a compiled plan (which disposeAll then uses). */
function compilePlanOf(value: unknown): void {
  forgetPlans();
  walk(value, { add: (leaf: unknown) => leaf });
  walk(value, { add: (leaf: unknown) => leaf });
  assert.equal(planStats().kept, 1);
}

Deno.test("disposeAll() by a compiled plan drops each storage's holds together, as one dispose() per tensor would", () => {
  const { a, b, inA, inB, extra, pool } = boundTensors(6);
  // Runs of tensors of one storage, interleaved with the other's, and one tensor twice.
  const result = [
    { x: inA[0], y: inA[1], z: inB[0] },
    { x: inA[2], y: inB[1], z: inA[3] },
    { x: inA[4], y: inA[4], z: inA[5] },
  ];
  compilePlanOf(result);
  disposeAll(result);
  assert.ok([...inA, ...inB].every((tensor) => tensor.disposed));
  assert.equal(b.released, true);
  // a keeps the hold of the tensor sharing its memory, and only that one.
  assert.equal(a.holds, 1);
  extra.dispose();
  assert.equal(a.released, true);
  assert.equal(pool.stats().inUseBytes, 0);
});

Deno.test("disposeAll() by a compiled plan: where a getter throws midway, the tensors disposed before it lose their holds", () => {
  const { a, inA, extra } = boundTensors(4);
  const result: Record<string, unknown>[] = [{ x: inA[0], y: inA[1] }, { x: inA[2], y: inA[3] }];
  compilePlanOf(result);
  Object.defineProperty(result[1], "y", {
    enumerable: true,
    get() {
      throw new Error("getter");
    },
  });
  assert.throws(() => disposeAll(result), /getter/);
  assert.deepEqual(inA.map((tensor) => tensor.disposed), [true, true, true, false]);
  // The three disposed tensors' holds dropped; the fourth's and extra's kept.
  assert.equal(a.holds, 2);
  inA[3].dispose();
  extra.dispose();
  assert.equal(a.released, true);
});

Deno.test("disposeAll() by a compiled plan: a storage whose release throws leaves the next storage's holds right", () => {
  // A pool over its limit frees what comes back, and its free fails (a CUDA error).
  const failing = madeUpPool(() => {
    throw new Error("free failed");
  }, () => 1000);
  const pool = madeUpPool();
  const first = new Storage(failing, failing.acquire(4096), 2);
  const second = new Storage(pool, pool.acquire(4096), 3);
  const [t1, t2] = boundTo(first, 2);
  const [u1, u2, u3] = boundTo(second, 3);
  const result = [t1, t2, u1];
  compilePlanOf(result);
  assert.throws(() => disposeAll(result), /free failed/);
  // u1's hold dropped, u2's and u3's kept (not first's two).
  assert.equal(second.holds, 2);
  u2.dispose();
  assert.equal(second.released, false);
  u3.dispose();
  assert.equal(second.released, true);
});
