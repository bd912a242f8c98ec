import assert from "node:assert/strict";
import {
  formatPath,
  pathKey,
  rejected,
  rethrowUnder,
  type WalkError,
} from "../../src/walk/errors.ts";

Deno.test("formatPath: identifiers as .name, numbers as [i], other keys quoted in brackets", () => {
  assert.equal(formatPath([]), "$");
  assert.equal(formatPath(["a", 0, "b c", "_x$1", "1a", ""]), '$.a[0]["b c"]._x$1["1a"][""]');
  assert.equal(formatPath(['say "hi"']), '$["say \\"hi\\""]');
});

Deno.test("formatPath: a path of up to 24 elements is written out in full", () => {
  const path = Array.from({ length: 24 }, (_, i) => i);
  assert.equal(formatPath(path), "$" + path.map((i) => `[${i}]`).join(""));
});

Deno.test("formatPath: a longer path keeps 8 elements at each end and counts the rest", () => {
  const path = Array.from({ length: 100 }, (_, i) => i);
  const head = path.slice(0, 8).map((i) => `[${i}]`).join("");
  const tail = path.slice(92).map((i) => `[${i}]`).join("");
  assert.equal(formatPath(path), `$${head}…(84 more)…${tail}`);
});

Deno.test("pathKey: numbers and strings as they are, other keys as strings, never throwing", () => {
  assert.equal(pathKey(3), 3);
  assert.equal(pathKey("k"), "k");
  assert.equal(pathKey(true), "true");
  assert.equal(pathKey(Symbol("s")), "Symbol(s)");
  assert.equal(pathKey(Object.create(null)), "[object Object]");
  assert.equal(
    pathKey({
      toString() {
        throw new Error("no");
      },
    }),
    "[object Object]",
  );
});

Deno.test("rethrowUnder puts the key in front of a WalkError's path and rethrows it", () => {
  const error = rejected.cyclic();
  error.path.push(0);
  assert.throws(() => rethrowUnder(error, "outer"), (thrown) => thrown === error);
  assert.deepEqual(error.path, ["outer", 0]);
});

Deno.test("rethrowUnder rethrows any other error unchanged", () => {
  const error = new Error("from a getter");
  assert.throws(() => rethrowUnder(error, "k"), (thrown) => thrown === error);
});

Deno.test("each rejection makes its error class with a message naming the path", () => {
  const cases: [WalkError, ErrorConstructor, RegExp][] = [
    [rejected.disposed(), Error, /^Cannot copy a disposed tensor at \$\.a\[1\]$/],
    [rejected.shrunk(), TypeError, /^Cannot copy a tensor whose buffer was detached or shrunk/],
    [rejected.detached(), TypeError, /^Cannot copy a detached ArrayBuffer at \$\.a\[1\]$/],
    [rejected.outOfBounds(), TypeError, /^Cannot copy a view that no longer fits/],
    [rejected.cyclic(), TypeError, /^Cannot copy a cyclic structure at \$\.a\[1\]$/],
    [rejected.tooDeep(5), RangeError, /^Cannot copy a structure nested deeper than 5 containers/],
  ];
  for (const [rejection, errorClass, message] of cases) {
    const error = rejection.make(formatPath(["a", 1]));
    assert.equal(error.constructor, errorClass);
    assert.match(error.message, message);
    assert.ok(error.message.endsWith(" at $.a[1]"), error.message);
  }
});
