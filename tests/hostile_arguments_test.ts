/**
 * Public functions given hostile arguments answer with the class API.md
 * names, synchronously, naming the argument: never an internal error from
 * building the message (`String()` of a Symbol, of an object without a
 * prototype or whose `toString` throws).
 */
import assert from "node:assert/strict";
import { hostArena, prefetch, setMemoryLimits, startCopy } from "../mod.ts";

const hostile: [string, unknown][] = [
  ["an object without a prototype", Object.create(null)],
  ["an object whose toString throws", {
    toString() {
      throw new Error("toString called");
    },
  }],
  ["a Symbol", Symbol("s")],
  ["a frozen object", Object.freeze({})],
  ["a bigint", 5n],
  ["a string", "8"],
];

function throwsNaming(run: () => unknown, name: "TypeError" | "RangeError", what: RegExp) {
  assert.throws(run, (error: Error) => {
    assert.equal(error.name, name, error.message);
    assert.match(error.message, what);
    return true;
  });
}

Deno.test("startCopy and prefetch name a hostile device with TypeError", () => {
  for (const [, value] of hostile) {
    const device = value as string;
    throwsNaming(() => startCopy([], device), "TypeError", /^Invalid device /);
    throwsNaming(() => prefetch([], device), "TypeError", /^Invalid device /);
  }
});

Deno.test("prefetch names a depth that is not a number with TypeError, one out of range with RangeError", () => {
  for (const [, value] of hostile) {
    throwsNaming(() => prefetch([], "cpu", { depth: value as number }), "TypeError", /depth/);
  }
  for (const depth of [0, -0, 1.5, NaN, Infinity, 2 ** 53]) {
    throwsNaming(() => prefetch([], "cpu", { depth }), "RangeError", /depth/);
  }
  for (const [, value] of hostile) {
    const options = { disposePrevious: value as boolean };
    throwsNaming(() => prefetch([], "cpu", options), "TypeError", /disposePrevious/);
  }
});

Deno.test("hostArena names a size or length that is not a number with TypeError, one out of range with RangeError", () => {
  for (const [, value] of hostile) {
    throwsNaming(() => hostArena(value as number), "TypeError", /hostArena bytes/);
  }
  for (const bytes of [0, -0, -1, 1.5, NaN, Infinity, 2 ** 53]) {
    throwsNaming(() => hostArena(bytes), "RangeError", /hostArena bytes/);
  }
  using arena = hostArena(64);
  for (const [, value] of hostile) {
    throwsNaming(() => arena.float32(value as number), "TypeError", /hostArena length/);
  }
  for (const length of [-1, 0.5, NaN, Infinity]) {
    throwsNaming(() => arena.float32(length), "RangeError", /hostArena length/);
  }
  assert.equal(arena.usedBytes, 0, "a refused call handed something out");
});

Deno.test("setMemoryLimits names a limit that is not a number with TypeError", () => {
  const before = setMemoryLimits({});
  try {
    for (const [, value] of hostile) {
      throwsNaming(
        () => setMemoryLimits({ waitMs: value as number }),
        "TypeError",
        /^Invalid waitMs: expected a number, got /,
      );
    }
    throwsNaming(
      () => setMemoryLimits({ waitMs: {} as number }),
      "TypeError",
      /got an object$/,
    );
  } finally {
    setMemoryLimits(before);
  }
});
