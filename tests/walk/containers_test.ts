import assert from "node:assert/strict";
import {
  ARRAY,
  arrayIndex,
  containerKind,
  MAP,
  NOT_A_CONTAINER,
  PLAIN_OBJECT,
  SPARSE_CHECK_LENGTH,
  visitByKeys,
} from "../../src/walk/containers.ts";

Deno.test("containerKind: arrays, Maps and plain objects (null prototype too) are containers", () => {
  assert.equal(containerKind([]), ARRAY);
  assert.equal(containerKind(new Array(3)), ARRAY);
  assert.equal(containerKind(new Map()), MAP);
  assert.equal(containerKind({}), PLAIN_OBJECT);
  assert.equal(containerKind(Object.create(null)), PLAIN_OBJECT);
});

Deno.test("containerKind: class instances, Sets, typed arrays and objects of other prototypes are not", () => {
  class Box {}
  assert.equal(containerKind(new Box()), NOT_A_CONTAINER);
  assert.equal(containerKind(new Set([1])), NOT_A_CONTAINER);
  assert.equal(containerKind(new Float32Array(2)), NOT_A_CONTAINER);
  assert.equal(containerKind(Object.create({})), NOT_A_CONTAINER);
  assert.equal(containerKind(new Date(0)), NOT_A_CONTAINER);
  assert.equal(containerKind(() => 0), NOT_A_CONTAINER);
});

Deno.test("containerKind: a Map subclass is a Map, an Array subclass an array", () => {
  class Named extends Map {}
  class List extends Array {}
  assert.equal(containerKind(new Named()), MAP);
  assert.equal(containerKind(new List()), ARRAY);
});

Deno.test("visitByKeys: only an array longer than SPARSE_CHECK_LENGTH with a hole is visited by keys", () => {
  const short: unknown[] = [];
  short[10] = 1;
  assert.equal(visitByKeys(short), false);
  const longHoley: unknown[] = [];
  longHoley[SPARSE_CHECK_LENGTH] = 1;
  assert.equal(visitByKeys(longHoley), true);
  const longDense = new Array(SPARSE_CHECK_LENGTH + 1).fill(0);
  assert.equal(visitByKeys(longDense), false);
  const exactlyAtLimit: unknown[] = [];
  exactlyAtLimit[SPARSE_CHECK_LENGTH - 1] = 1;
  assert.equal(visitByKeys(exactlyAtLimit), false);
});

Deno.test("visitByKeys: a hole filled by an index of Array.prototype is not a hole", () => {
  const filled: unknown[] = new Array(SPARSE_CHECK_LENGTH + 1).fill(0);
  delete filled[5];
  assert.equal(visitByKeys(filled), true);
  Object.defineProperty(Array.prototype, "5", { value: "inherited", configurable: true });
  try {
    assert.equal(visitByKeys(filled), false);
  } finally {
    delete (Array.prototype as unknown as Record<string, unknown>)["5"];
  }
});

Deno.test("arrayIndex: the canonical form of an integer below 2^32 - 1 is an index", () => {
  assert.equal(arrayIndex("0"), 0);
  assert.equal(arrayIndex("7"), 7);
  assert.equal(arrayIndex("4294967294"), 4294967294);
});

Deno.test("arrayIndex: every other key is a named property (-1)", () => {
  for (
    const key of [
      "4294967295",
      "07",
      "7.0",
      " 7",
      "7 ",
      "+7",
      "0x7",
      "7e0",
      "-0",
      "",
      "-1",
      "1.5",
      "NaN",
      "Infinity",
      "length",
    ]
  ) {
    assert.equal(arrayIndex(key), -1, `key ${JSON.stringify(key)}`);
  }
});
