import assert from "node:assert/strict";
import { collectLeaves } from "../../src/walk/collect_leaves.ts";
import { MAX_DEPTH, walk } from "../../src/walk/walk.ts";
import { Tensor } from "../../src/tensor.ts";
import { sparseArray } from "../_helpers.ts";

Deno.test("walk() collects TypedArray and Tensor leaves depth-first", () => {
  const a = new Float32Array(1);
  const b = Tensor.from(new Int32Array(2));
  const c = new Uint8Array(3);
  assert.deepEqual(collectLeaves({ x: [a, { y: b }], z: new Map([["k", c]]) }), [a, b, c]);
});

Deno.test("walk() rebuilds arrays, objects and Maps with the same keys in order", () => {
  const input = { b: [new Float32Array(1), "s"], a: new Map([[1, new Int8Array(1)]]), n: null };
  let count = 0;
  const result = walk(input, { add: () => `out${count++}` }) as typeof input;
  assert.deepEqual(Object.keys(result), ["b", "a", "n"]);
  assert.deepEqual(result.b, ["out0", "s"]);
  assert.deepEqual([...(result.a as Map<number, unknown>)], [[1, "out1"]]);
  assert.notEqual(result, input);
  assert.notEqual(result.b, input.b);
});

Deno.test("walk() passes every other value through by reference", () => {
  class Box {
    inner = new Float32Array(1);
  }
  const date = new Date();
  const box = new Box();
  const view = new DataView(new ArrayBuffer(4));
  const input = [date, box, view, new ArrayBuffer(2), 3, "x", undefined];
  const result = walk(input, { add: () => assert.fail("no leaf here") }) as unknown[];
  input.forEach((value, i) => assert.equal(result[i], value));
});

Deno.test("walk() keeps null-prototype objects null-prototype", () => {
  const input = Object.assign(Object.create(null), { a: new Float32Array(1) });
  const result = walk(input, { add: () => 1 }) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(result), null);
  assert.equal(result.a, 1);
});

Deno.test("walk() of a root leaf returns the leaf's mapping", () => {
  assert.equal(walk(new Float32Array(2), { add: () => "t" }), "t");
  assert.equal(walk("plain", { add: () => "t" }), "plain");
});

Deno.test("walk() copies a shared subtree twice (no cycle)", () => {
  const shared = [new Float32Array(1)];
  assert.equal(collectLeaves({ a: shared, b: shared }).length, 2);
});

Deno.test("walk() throws TypeError naming the path of a cycle", () => {
  const a: Record<string, unknown> = { list: [] };
  (a.list as unknown[]).push({ back: a });
  assert.throws(() => collectLeaves(a), {
    name: "TypeError",
    message: /cyclic.*\$\.list\[0\]\.back/,
  });
  const m = new Map<string, unknown>();
  m.set("self", m);
  assert.throws(() => collectLeaves(m), TypeError);
});

Deno.test("walk() throws TypeError for a leaf over a detached buffer", () => {
  const data = new Float32Array(4);
  data.buffer.transfer();
  assert.throws(() => collectLeaves({ x: [data] }), {
    name: "TypeError",
    message: "Cannot copy a detached ArrayBuffer at $.x[0]",
  });
});

Deno.test("walk() throws TypeError for a view pushed out of bounds by a resize, not for empty views", () => {
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const view = new Float32Array(buffer, 8, 2);
  buffer.resize(4);
  assert.throws(() => collectLeaves({ boxes: view }), {
    name: "TypeError",
    message: "Cannot copy a view that no longer fits its resized ArrayBuffer at $.boxes",
  });
  const empty = new Float32Array(new ArrayBuffer(16, { maxByteLength: 64 }), 16, 0);
  assert.equal(collectLeaves([empty, new Int8Array(0)]).length, 2);
});

Deno.test("walk() throws TypeError for a tensor whose data was detached after wrapping", () => {
  const data = new Float32Array(4);
  const tensor = Tensor.from(data);
  data.buffer.transfer();
  assert.throws(() => collectLeaves({ t: tensor }), {
    name: "TypeError",
    message: "Cannot copy a tensor whose buffer was detached or shrunk after Tensor.from() at $.t",
  });
});

Deno.test("walk() throws Error for a disposed tensor", () => {
  const tensor = Tensor.from(new Float32Array(1));
  tensor.dispose();
  assert.throws(() => collectLeaves([tensor]), { message: /disposed/ });
});

Deno.test("walk() throws RangeError past the depth limit instead of overflowing", () => {
  let deep: unknown = new Float32Array(1);
  for (let i = 0; i < MAX_DEPTH + 5; i++) deep = [deep];
  assert.throws(() => collectLeaves(deep), { name: "RangeError", message: /deeper than/ });
});

Deno.test("walk() takes Map keys of any kind and never converts them to strings on success", () => {
  const key = Object.create(null);
  const loud = {
    toString(): string {
      throw new Error("toString called");
    },
  };
  const input = new Map<unknown, unknown>([[key, new Float32Array(1)], [loud, new Int8Array(2)]]);
  const leaves: unknown[] = [];
  const output = walk(input, { add: (leaf) => (leaves.push(leaf), "leaf") }) as Map<
    unknown,
    unknown
  >;
  assert.equal(leaves.length, 2);
  assert.equal(output.get(key), "leaf");
  assert.equal(output.get(loud), "leaf");
});

Deno.test("walk() names a Map key it cannot stringify in an error path without failing itself", () => {
  const key = Object.create(null);
  const cyclic: unknown[] = [];
  cyclic.push(new Map([[key, cyclic]]));
  assert.throws(() => walk(cyclic, { add: (leaf) => leaf }), {
    name: "TypeError",
    message: 'Cannot copy a cyclic structure at $[0]["[object Object]"]',
  });
});

Deno.test("walk() reads each getter once: the value walked is the value the output holds", () => {
  let reads = 0;
  const input = {
    get boxes(): Float32Array {
      reads++;
      return new Float32Array(reads);
    },
  };
  const output = walk(input, { add: (leaf) => ({ wrapped: leaf }) }) as Record<string, unknown>;
  assert.equal(reads, 1);
  assert.deepEqual(output.boxes, { wrapped: new Float32Array(1) });
});

Deno.test("walk() drops symbol-keyed properties of plain objects, as structuredClone does", () => {
  const key = Symbol("extra");
  const output = walk({ [key]: new Uint8Array(3), ids: new Int32Array(1) }, { add: () => "leaf" });
  assert.deepEqual(Object.getOwnPropertySymbols(output), []);
  assert.deepEqual(output, { ids: "leaf" });
});

Deno.test("walk() copies objects of one shape and of many shapes alike, keys in order", () => {
  const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, i]));
  const odd = Object.create(null);
  Object.defineProperty(odd, "__proto__", { value: 1, enumerable: true });
  Object.assign(odd, { 2: "two", b: new Int8Array(1), 1: "one" });
  const nullProto = Object.assign(Object.create(null), { a: 1, b: new Int8Array(2) });
  const samples = [{ a: 1, b: new Int8Array(2) }, { a: 2, b: new Int8Array(2) }, nullProto];
  const output = walk({ many, odd, samples }, { add: () => "leaf" }) as Record<string, never>;
  assert.deepEqual(Object.keys(output.many), Object.keys(many));
  assert.deepEqual(Object.keys(output.odd), ["1", "2", "__proto__", "b"]);
  assert.equal(Object.getPrototypeOf(output.odd), null);
  assert.equal((output.odd as Record<string, unknown>)["__proto__"], 1);
  assert.deepEqual(output.samples[0], { a: 1, b: "leaf" });
  assert.deepEqual(output.samples[1], { a: 2, b: "leaf" });
  assert.equal(Object.getPrototypeOf(output.samples[2]), null);
  assert.deepEqual({ ...(output.samples[2] as object) }, { a: 1, b: "leaf" });
});

Deno.test("the depth error's message stays short: both ends of the path, the middle counted", () => {
  let deep: unknown = new Float32Array(1);
  for (let i = 0; i < MAX_DEPTH + 5; i++) deep = { next: deep };
  assert.throws(() => collectLeaves(deep), (error: Error) => {
    assert.ok(error.message.length < 300, `${error.message.length} characters`);
    assert.match(
      error.message,
      /^Cannot copy a structure nested deeper than 2048 containers at \$(\.next){8}…\(2032 more\)…(\.next){8}$/,
    );
    return true;
  });
});

Deno.test("a cycle deep in a structure is found, by the same check that keeps deep walks linear", () => {
  const root: Record<string, unknown> = {};
  let node = root;
  for (let i = 0; i < 1000; i++) {
    const child: Record<string, unknown> = { leaf: new Int8Array(1) };
    node.next = child;
    node = child;
  }
  assert.equal(collectLeaves(root).length, 1000);
  const middle = (root.next as Record<string, unknown>).next as object;
  node.next = middle; // back to depth 2 from depth 1000
  assert.throws(() => collectLeaves(root), { name: "TypeError", message: /cyclic structure/ });
  // A container seen twice but not on its own path is not a cycle.
  const shared = { leaf: new Int8Array(1) };
  let chain: Record<string, unknown> = { a: shared, b: shared };
  for (let i = 0; i < 100; i++) chain = { down: chain, again: shared };
  assert.equal(collectLeaves(chain).length, 102);
});

Deno.test("a holey array is walked by its elements, not by its length", () => {
  const holey = sparseArray([[1e9, new Float32Array(2)], [3, new Int8Array(1)]]);
  const output = walk(holey, { add: (leaf) => ({ leaf }) }) as unknown[];
  assert.equal(output.length, 1e9 + 1);
  assert.deepEqual(output[3], { leaf: new Int8Array(1) });
  assert.deepEqual(output[1e9], { leaf: new Float32Array(2) });
  assert.equal(0 in output, false);
});

Deno.test("a long holey array's named properties are not indices: each index is visited once, holes stay holes", () => {
  // Named properties that Number() reads as integers; none is an array index.
  const names = ["", "-0", "0x10", " 5", "+3", "1e3", "-1", "07", "1.0", "4294967295"];
  for (const name of names) {
    const elements = [0, 3, 5, 16, 70_000].map((i) => [i, new Float32Array([i])] as const);
    const holey: unknown[] = [];
    for (const [i, leaf] of elements) holey[i] = leaf;
    (holey as unknown as Record<string, unknown>)[name] = new Int8Array(1);
    const leaves = collectLeaves(holey);
    assert.deepEqual(leaves, elements.map(([, leaf]) => leaf), JSON.stringify(name));
    const output = walk(holey, { add: (leaf) => leaf }) as unknown[];
    assert.equal(output.length, 70_001);
    assert.deepEqual(Object.keys(output), ["0", "3", "5", "16", "70000"], JSON.stringify(name));
  }
});
