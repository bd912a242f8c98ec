import assert from "node:assert/strict";
import { startCopy, Tensor } from "../../mod.ts";
import {
  keysMatchShape,
  MAX_SHAPE_KEY_LENGTH,
  MAX_SHAPE_KEYS,
  shapeOf,
  shapeStats,
} from "../../src/walk/object_shapes.ts";
import { walk } from "../../src/walk/walk.ts";

const rethrow = (error: unknown): never => {
  throw error;
};

/** Pairs of inputs whose objects' keys join with "\u0000" to the same string. */
function colliding(leaf: () => unknown): [Record<string, unknown>, Record<string, unknown>][] {
  return [
    [{ s: {} }, { s: { "": leaf() } }],
    [{ s: { a: 1, b: 2 } }, { s: { "a\u0000b": leaf() } }],
    [{ s: { "a\u0000b": 1 } }, { s: { a: leaf(), b: leaf() } }],
    [{ s: { a: 1, "b\u0000c": 2 } }, { s: { "a\u0000b": leaf(), c: leaf() } }],
    [{ s: { "": 1, a: 2 } }, { s: { "\u0000a": leaf() } }],
  ];
}

Deno.test("a compiled object copy is never used for other keys that join to the same string", async () => {
  for (const [first, second] of colliding(() => new Float32Array(2))) {
    // Copied a few times: the first input's object is compiled.
    for (let i = 0; i < 3; i++) await startCopy(first, "cpu").get();
    const handle = startCopy(second, "cpu");
    const result = (await handle.get()) as { s: Record<string, unknown> };
    const keys = Object.keys(second.s as object);
    assert.deepEqual(Object.keys(result.s), keys);
    for (const key of keys) assert.ok(result.s[key] instanceof Tensor, JSON.stringify(key));
    assert.equal(handle.stats().tensors, keys.length, JSON.stringify(keys));
  }
});

Deno.test("a leaf under keys that join like a compiled object's is still checked", async () => {
  for (
    const [first, second] of colliding(() => {
      const tensor = Tensor.from(new Float32Array(1));
      tensor.dispose();
      return tensor;
    })
  ) {
    for (let i = 0; i < 3; i++) await startCopy(first, "cpu").get();
    assert.throws(() => startCopy(second, "cpu"), {
      message: /^Cannot copy a disposed tensor at \$\.s/,
    });
  }
});

Deno.test("shapeOf() compiles a key list the second time it is seen, and returns it only for those keys", () => {
  const keys = ["shape_test_x", "shape_test_y"];
  assert.equal(shapeOf(keys, false, rethrow), undefined, "seen once");
  const shape = shapeOf(keys, false, rethrow);
  assert.ok(shape && keysMatchShape(keys, false, shape));
  assert.equal(shapeOf([...keys], false, rethrow), shape);
  assert.equal(shapeOf(["shape_test_x\u0000shape_test_y"], false, rethrow), undefined);
  assert.equal(shapeOf(keys, true, rethrow), undefined, "another prototype kind, seen once");
});

Deno.test("shapeOf() never compiles a key longer than MAX_SHAPE_KEY_LENGTH, nor more than MAX_SHAPE_KEYS keys", () => {
  const before = shapeStats().compiled;
  const long = ["a", "k".repeat(MAX_SHAPE_KEY_LENGTH + 1)];
  const many = Array.from({ length: MAX_SHAPE_KEYS + 1 }, (_, i) => `many${i}`);
  for (let i = 0; i < 3; i++) {
    assert.equal(shapeOf(long, false, rethrow), undefined);
    assert.equal(shapeOf(many, false, rethrow), undefined);
  }
  assert.equal(shapeStats().compiled, before);
  // The walk copies their objects generically, keys in order.
  const output = walk({ [long[1]]: new Int8Array(1), a: 2 }, { add: () => "leaf" });
  assert.deepEqual(Object.entries(output as object), [[long[1], "leaf"], ["a", 2]]);
});
