import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { ARRAY_CLASSES, NO_CODE } from "../../src/array_code.ts";
import { walk } from "../../src/walk/walk.ts";

Deno.test("a sink's add gets each leaf with its host bytes and a TypedArray's class code, and what it returns takes the leaf's place", () => {
  const data = new Int32Array([1, 2, 3]);
  const tensor = Tensor.from(data, [3]);
  const array = new Float64Array(1);
  const added: [unknown, unknown][] = [];
  const codes: number[] = [];
  let ends = 0;
  try {
    const out = walk({ t: tensor, list: [array] }, {
      add(leaf, bytes, code) {
        added.push([leaf, bytes]);
        codes.push(code);
        return added.length;
      },
      end() {
        ends++;
      },
    });
    assert.deepEqual(out, { t: 1, list: [2] });
    assert.equal(added[0][0], tensor);
    assert.ok(added[0][1] instanceof Int32Array);
    assert.deepEqual(added[1], [array, array]);
    assert.deepEqual(codes, [NO_CODE, ARRAY_CLASSES.indexOf(Float64Array)]);
    assert.equal(ends, 1);
  } finally {
    tensor.dispose();
  }
});

Deno.test("a sink's end is not called when the walk is rejected", () => {
  let ends = 0;
  const cyclic: unknown[] = [new Float32Array(1)];
  cyclic.push(cyclic);
  assert.throws(() =>
    walk(cyclic, {
      add: () => 0,
      end() {
        ends++;
      },
    }), { name: "TypeError", message: /cyclic/ });
  assert.equal(ends, 0);
});
