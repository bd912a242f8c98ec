import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { matchShape } from "../../src/reuse/into_match.ts";
import { buildShape, type IntoShape } from "../../src/reuse/into_shape.ts";
import { anyLeaf, columns, data, resultLike } from "./_into_fixtures.ts";

// Data is matched against a result's structure exactly, with the path of
// the first difference in the error.

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
