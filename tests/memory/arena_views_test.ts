import assert from "node:assert/strict";
import {
  ARENA_ALIGNMENT,
  type ArrayClass,
  checkCount,
  classUsedArena,
  elementSize,
  noRoom,
  notAView,
} from "../../src/memory/arena_views.ts";

Deno.test("views start at multiples of 16 bytes: the alignment packed outputs have", () => {
  assert.equal(ARENA_ALIGNMENT, 16);
  // Every element size divides it, so a view of any class is aligned for it.
  for (const size of [1, 2, 4, 8]) assert.equal(ARENA_ALIGNMENT % size, 0);
});

Deno.test("elementSize() gives the element size of every TypedArray class", () => {
  const classes = [
    [Int8Array, 1],
    [Uint8Array, 1],
    [Uint8ClampedArray, 1],
    [Int16Array, 2],
    [Uint16Array, 2],
    [Float16Array, 2],
    [Int32Array, 4],
    [Uint32Array, 4],
    [Float32Array, 4],
    [Float64Array, 8],
    [BigInt64Array, 8],
    [BigUint64Array, 8],
  ] as const;
  for (const [cls, size] of classes) assert.equal(elementSize(cls), size, cls.name);
});

Deno.test("elementSize() rejects what is no TypedArray class, naming it", () => {
  const cases: [unknown, string][] = [
    [DataView, "class DataView"],
    [
      class Sized {
        static BYTES_PER_ELEMENT = 3;
      },
      "class Sized",
    ],
    [function () {}, "an anonymous class"],
    [null, "null"],
    [4, "number"],
    [{ BYTES_PER_ELEMENT: 4 }, "object"],
  ];
  for (const [cls, named] of cases) {
    assert.throws(() => elementSize(cls as ArrayClass<ArrayBufferView>), {
      name: "TypeError",
      message:
        `Invalid hostArena class: expected a TypedArray class (BYTES_PER_ELEMENT 1, 2, 4 or 8), got ${named}`,
    });
  }
});

Deno.test("checkCount() takes whole numbers from its minimum up", () => {
  checkCount(0, "length", 0);
  checkCount(1, "bytes", 1);
  checkCount(Number.MAX_SAFE_INTEGER, "bytes", 1);
});

Deno.test("checkCount() throws TypeError for a non-number and RangeError out of range, naming the argument", () => {
  assert.throws(() => checkCount(null, "bytes", 1), {
    name: "TypeError",
    message: "Invalid hostArena bytes: expected a number, got null",
  });
  assert.throws(() => checkCount("8", "bytes", 1), { name: "TypeError" });
  assert.throws(() => checkCount(8n, "length", 0), { name: "TypeError" });
  for (const value of [0, -1, 1.5, NaN, Infinity, 2 ** 53]) {
    assert.throws(() => checkCount(value, "bytes", 1), {
      name: "RangeError",
      message: /^Invalid hostArena bytes: expected a whole number >= 1, got /,
    });
  }
});

Deno.test("the errors of array() say what did not fit and which class misbehaved", () => {
  const full = noRoom(36, 32, 64);
  assert.ok(full instanceof RangeError);
  assert.equal(
    full.message,
    "Cannot carve 36 more bytes from the host arena: they do not fit (32 of 64 used); make the arena larger or reset() it",
  );
  const reentrant = classUsedArena(class Sneaky {});
  assert.ok(reentrant instanceof TypeError);
  assert.equal(
    reentrant.message,
    "Invalid hostArena class: class Sneaky used the arena while it was making a view of it",
  );
  const other = notAView(class Fake {}, 3);
  assert.ok(other instanceof TypeError);
  assert.equal(
    other.message,
    "Invalid hostArena class: expected a TypedArray class, got class Fake, which made something else than a view of 3 elements",
  );
});
