import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { checkCodeStats, compileCheck, MAX_KEY_LENGTH } from "../../src/reuse/into_code.ts";
import { matchShape } from "../../src/reuse/into_match.ts";
import { buildShape, type IntoShape } from "../../src/reuse/into_shape.ts";
import { anyLeaf, columns } from "./_into_fixtures.ts";

// The compiled check answers what matchShape answers (fits: the number of
// values passed through; else -1), for the structures it compiles.

Deno.test("the compiled check agrees with matchShape on fitting and changed data", () => {
  // Maps are not compiled: a structure without them.
  const result = {
    samples: Array.from({ length: 5 }, (_, i) => ({
      a: Tensor.from(new Float32Array(i + 1)),
      b: [Tensor.from(new Uint8Array(2)), `s${i}`],
    })),
    last: Tensor.from(new Int16Array(3)),
    "odd key": 1,
  };
  const shape = buildShape(result) as IntoShape;
  const check = compileCheck(shape)!;
  assert.ok(check, "compiled");
  const fits = () => ({
    samples: result.samples.map((_, i) => ({
      a: new Float32Array(i + 1),
      b: [new Uint8Array(2), i],
    })),
    last: new Int16Array(3),
    "odd key": "x",
  });
  const compiled = columns();
  const generic = columns();
  assert.equal(
    check(fits(), result, compiled),
    matchShape(shape, fits(), result, generic, anyLeaf),
  );
  assert.equal(compiled.sources.length, 11);
  assert.deepEqual(compiled.passValues, [0, 1, 2, 3, 4, "x"]);
  const changes: ((d: ReturnType<typeof fits>) => unknown)[] = [
    (d) => ({ ...d, more: 1 }),
    (d) => ({ last: d.last, samples: d.samples, "odd key": 1 }), // keys in another order
    (d) => ({ ...d, samples: d.samples.slice(1) }),
    (d) => ({ ...d, samples: [...d.samples.slice(1), { b: [], a: 1 }] }),
    (d) => ({ ...d, "odd key": [1] }),
    (d) => Object.assign(Object.create({ inherited: 1 }), d),
  ];
  for (const change of changes) {
    assert.equal(check(change(fits()), result, columns()), -1);
    assert.throws(() => matchShape(shape, change(fits()), result, columns(), anyLeaf), TypeError);
  }
  // A result changed under its structure fails the compiled check too.
  const kept = result.last;
  result.last = Tensor.from(new Int16Array(3));
  assert.equal(check(fits(), result, columns()), -1);
  result.last = kept;
});

Deno.test("the compiled check sees an inherited enumerable key on Object.prototype", () => {
  const result = { a: Tensor.from(new Float32Array(1)), b: 1 };
  const shape = buildShape(result) as IntoShape;
  const check = compileCheck(shape)!;
  const input = { a: new Float32Array(1) }; // b missing: only an inherited b
  (Object.prototype as Record<string, unknown>).b = 2;
  try {
    assert.equal(check(input, result, columns()), -1);
  } finally {
    delete (Object.prototype as Record<string, unknown>).b;
  }
  assert.equal(check({ a: new Float32Array(1), b: 3 }, result, columns()), 1);
});

Deno.test("structures with a Map, a __proto__ key or a key past MAX_KEY_LENGTH are left to matchShape", () => {
  const leaf = () => Tensor.from(new Float32Array(1));
  const results: object[] = [
    { m: new Map([["k", leaf()]]) },
    JSON.parse('{"__proto__": 1}') as object,
    { ["k".repeat(MAX_KEY_LENGTH + 1)]: leaf() },
  ];
  (results[1] as Record<string, unknown>).t = leaf();
  for (const result of results) {
    const shape = buildShape(result) as IntoShape;
    assert.equal(typeof shape, "object");
    assert.equal(compileCheck(shape), undefined);
  }
  // A key of exactly MAX_KEY_LENGTH is compiled.
  const edge = buildShape({ ["k".repeat(MAX_KEY_LENGTH)]: leaf() }) as IntoShape;
  assert.equal(typeof compileCheck(edge), "function");
});

Deno.test("one structure's code is compiled once: a second result of that structure reuses it", () => {
  const make = () => ({ a: [Tensor.from(new Uint8Array(2))], zz_code_test_key: 1 });
  const first = compileCheck(buildShape(make()) as IntoShape)!;
  const before = checkCodeStats();
  const second = compileCheck(buildShape(make()) as IntoShape)!;
  assert.deepEqual(checkCodeStats(), before);
  // Each check reads its own result's tensors (they are arguments, not code).
  const [r1, r2] = [make(), make()];
  const c1 = compileCheck(buildShape(r1) as IntoShape)!;
  const input = { a: [new Uint8Array(2)], zz_code_test_key: 2 };
  assert.equal(c1(input, r1, columns()), 1);
  assert.equal(c1(input, r2, columns()), -1);
  assert.notEqual(first, second);
});

Deno.test("an array of items of one structure compiles as a loop: every item is still checked", () => {
  const result = {
    items: Array.from({ length: 4 }, () => ({ x: Tensor.from(new Int8Array(1)), s: "s" })),
  };
  const check = compileCheck(buildShape(result) as IntoShape)!;
  const input = () => ({ items: Array.from({ length: 4 }, () => ({ x: new Int8Array(1), s: 1 })) });
  assert.equal(check(input(), result, columns()), 4);
  const wrongLast = input();
  wrongLast.items[3] = { s: 1, x: new Int8Array(1) } as never; // keys in another order
  assert.equal(check(wrongLast, result, columns()), -1);
  assert.throws(
    () => matchShape(buildShape(result) as IntoShape, wrongLast, result, columns(), anyLeaf),
    /at \$\.items\[3\]/,
  );
});

Deno.test("the compiled check reads a proxy that throws on keys it does not know (a strict get trap) by its keys only", () => {
  const result = { k: Tensor.from(new Float32Array(2)), n: 3 };
  const check = compileCheck(buildShape(result) as IntoShape)!;
  const read: PropertyKey[] = [];
  const strict = new Proxy({ k: new Float32Array(2), n: 4 }, {
    get(target, key) {
      read.push(key);
      if (!(key in target)) throw new Error(`unknown key ${String(key)}`);
      return Reflect.get(target, key);
    },
  });
  const compiled = columns();
  assert.equal(check(strict, result, compiled), 1);
  assert.deepEqual(read, ["k", "n"]);
  assert.deepEqual(compiled.passValues, [4]);
  // A `has` trap that throws leaves the data to matchShape (-1), never a throw.
  const hostile = new Proxy({ k: new Float32Array(2), n: 4 }, {
    has() {
      throw new Error("no has");
    },
  });
  assert.equal(check(hostile, result, columns()), -1);
});
