import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import {
  buildShape,
  type IntoShape,
  type MatchColumns,
  matchShape,
} from "../../src/reuse/into_shape.ts";
import { compileCheck } from "../../src/reuse/into_code.ts";

// A result's structure is read from the result (each tensor checked by the
// caller, none twice); data is matched against it exactly, with the path of
// the first difference in the error.

function columns(): MatchColumns {
  return { sources: [], passContainers: [], passKeys: [], passValues: [] };
}

/** A stand-in result: CPU tensors play the outputs (the structure code never reads their device). */
function resultLike() {
  const result = {
    boxes: [Tensor.from(new Float32Array(8), [2, 4]), Tensor.from(new Float32Array(4), [1, 4])],
    ids: Tensor.from(new BigInt64Array(2)),
    name: "a",
    meta: new Map<unknown, unknown>([["k", Tensor.from(new Uint8Array(3))], [7, null]]),
    none: Object.assign(Object.create(null), { x: Tensor.from(new Int32Array(1)) }),
  };
  const outputs = [
    result.boxes[0],
    result.boxes[1],
    result.ids,
    result.meta.get("k") as Tensor,
    result.none.x as Tensor,
  ];
  return { result, outputs };
}

function data() {
  return {
    boxes: [new Float32Array(8), new Float32Array(4)],
    ids: new BigInt64Array(2),
    name: "b",
    meta: new Map<unknown, unknown>([["k", new Uint8Array(3)], [7, "seven"]]),
    none: Object.assign(Object.create(null), { x: new Int32Array(1) }),
  };
}

const anyLeaf = () => {};

Deno.test("buildShape records the result's tensors in the walk's order", () => {
  const { result, outputs } = resultLike();
  const shape = buildShape(result) as IntoShape;
  assert.equal(typeof shape, "object");
  assert.deepEqual(shape.tensors, outputs);
  assert.equal(shape.passes, 2); // name, and the Map's null
});

Deno.test("buildShape says where a tensor is refused, met twice, or that there is none", () => {
  const { result, outputs } = resultLike();
  const refuse = (tensor: Tensor) => tensor === outputs[2] ? "is refused" : undefined;
  assert.equal(buildShape(result, refuse), "$.ids is refused");
  result.boxes[1] = result.boxes[0];
  assert.equal(buildShape(result), "$.boxes[1] is a tensor met before");
  assert.equal(buildShape({ a: 1, b: [] }), "it holds no tensor");
  const cyclic: unknown[] = [Tensor.from(new Uint8Array(1))];
  cyclic.push(cyclic);
  assert.equal(buildShape(cyclic), "$[1] is a cycle");
});

Deno.test("matchShape fills the columns: the data's leaves in order, the values passed through", () => {
  const { result } = resultLike();
  const shape = buildShape(result) as IntoShape;
  const input = data();
  const filled = columns();
  const passes = matchShape(shape, input, result, filled, anyLeaf);
  assert.equal(passes, 2);
  assert.deepEqual(filled.sources.slice(0, 5), [
    input.boxes[0],
    input.boxes[1],
    input.ids,
    input.meta.get("k"),
    input.none.x,
  ]);
  assert.deepEqual(filled.passValues.slice(0, 2), ["b", "seven"]);
  assert.equal(filled.passContainers[0], result);
  assert.equal(filled.passContainers[1], result.meta);
});

Deno.test("matchShape names the path and what differs", () => {
  const { result } = resultLike();
  const shape = buildShape(result) as IntoShape;
  const cases: [(d: ReturnType<typeof data>) => unknown, RegExp][] = [
    [(d) => ({ ...d, extra: 1 }), /expected a plain object with keys .* at \$, got keys/],
    [
      (d) => ({ ...d, boxes: [d.boxes[0]] }),
      /expected an array of 2 elements at \$\.boxes, got an array of 1/,
    ],
    [
      (d) => ({ ...d, name: {} }),
      /expected a value passed through .* at \$\.name, got a plain object/,
    ],
    [(d) => ({ ...d, none: { x: d.none.x } }), /null prototype at \$\.none/],
    [
      (d) => ({ ...d, meta: new Map<unknown, unknown>([["k", 1], [8, 2]]) }),
      /expected the key 7 at entry 1 of the Map at \$\.meta, got 8/,
    ],
    [(d) => [d], /expected a plain object at \$, got an array/],
  ];
  for (const [change, message] of cases) {
    assert.throws(
      () => matchShape(shape, change(data()), result, columns(), anyLeaf),
      (error: unknown) => error instanceof TypeError && message.test(error.message),
      String(message),
    );
  }
});

Deno.test("matchShape refuses a result changed since its structure was read", () => {
  const { result } = resultLike();
  const shape = buildShape(result) as IntoShape;
  result.ids = Tensor.from(new BigInt64Array(2));
  assert.throws(
    () => matchShape(shape, data(), result, columns(), anyLeaf),
    /Cannot copy into this result: \$\.ids no longer holds the tensor the copy made there/,
  );
});

Deno.test("the leaf check sees each leaf with its path", () => {
  const { result } = resultLike();
  const shape = buildShape(result) as IntoShape;
  const seen: string[] = [];
  matchShape(shape, data(), result, columns(), (n, _leaf, path) => seen.push(`${n} ${path()}`));
  assert.deepEqual(seen, ["0 $.boxes[0]", "1 $.boxes[1]", "2 $.ids", "3 $.meta.k", "4 $.none.x"]);
});

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
