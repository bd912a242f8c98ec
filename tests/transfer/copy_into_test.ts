import assert from "node:assert/strict";
import { startCopy } from "../../mod.ts";

// The option's checks that need no GPU; tests/gpu/copy_into_test.ts has the copies.

Deno.test("option into: a value that cannot be a result is a TypeError naming the option", () => {
  for (const value of [5, "x", null, true, 1n]) {
    assert.throws(
      () => startCopy([new Float32Array(1)], "cpu", { into: value as never }),
      (error: unknown) =>
        error instanceof TypeError &&
        /^Invalid option into: expected an earlier result/.test(error.message),
    );
  }
});

Deno.test("option into: a copy to the CPU is refused (copies into results go to a CUDA device)", () => {
  assert.throws(
    () => startCopy([new Float32Array(1)], "cpu", { into: [] }),
    (error: unknown) =>
      error instanceof TypeError &&
      /Invalid option into: .* CUDA device, got device "cpu"/.test(error.message),
  );
});

Deno.test("option into: undefined is no option, and an inherited into is ignored", async () => {
  const result = await startCopy([new Float32Array(2)], "cpu", { into: undefined }).get();
  assert.equal(result[0].numel, 2);
  (Object.prototype as Record<string, unknown>).into = 5;
  try {
    assert.equal((await startCopy([new Float32Array(1)], "cpu", {}).get())[0].numel, 1);
  } finally {
    delete (Object.prototype as Record<string, unknown>).into;
  }
});

// Setters of the result run when the copy writes the values it passes
// through, after the holds check: the check runs again after them.
// (A made-up result over made-up memory: the copies are refused before
// anything reaches a device.)

Deno.test("option into: a setter of the result that disposes one of its tensors refuses the copy, leaving the result free", async () => {
  const { startCopyInto } = await import("../../src/transfer/copy_into.ts");
  const { resultEntry } = await import("../../src/reuse/results.ts");
  const { resolveOptions } = await import("../../src/options.ts");
  const { CUDA0, fittingData, madeResult } = await import("./into/_result.ts");
  // `boxes` shares its chunk with `ids`; `big` is the last hold on its block.
  for (const victim of ["boxes", "big"] as const) {
    const { result, chunk, own } = madeResult();
    let name: unknown = result.name;
    Object.defineProperty(result, "name", {
      get: () => name,
      set: (value) => {
        name = value;
        result[victim].dispose();
      },
      enumerable: true,
    });
    assert.throws(
      () => startCopyInto(fittingData(), CUDA0, resolveOptions(undefined), result, undefined),
      new RegExp(`its tensor ${victim === "boxes" ? 0 : 2} \\(in the walk's order\\) was disposed`),
      victim,
    );
    assert.equal(name, "a", `${victim}: the value passed through put back`);
    assert.equal(resultEntry(result, CUDA0).busy, false, victim);
    // The copy kept no hold: the result's memory goes back when it is disposed.
    result.boxes.dispose();
    result.ids.dispose();
    result.big.dispose();
    assert.deepEqual([chunk.released, own.released], [true, true], victim);
  }
});

Deno.test("option into: a setter of the result that takes its memory (a tensor over it) refuses the copy", async () => {
  const { startCopyInto } = await import("../../src/transfer/copy_into.ts");
  const { resolveOptions } = await import("../../src/options.ts");
  const { tensorInternals } = await import("../../src/tensor.ts");
  const { CUDA0, fittingData, madeResult } = await import("./into/_result.ts");
  const { result } = madeResult();
  let name: unknown = result.name;
  let other: { disposed: boolean } | undefined;
  Object.defineProperty(result, "name", {
    get: () => name,
    set: (value) => {
      name = value;
      // What a copy of `big` to its own device returns, then `big` disposed.
      other ??= tensorInternals.share(result.big);
      result.big.dispose();
    },
    enumerable: true,
  });
  assert.throws(
    () => startCopyInto(fittingData(), CUDA0, resolveOptions(undefined), result, undefined),
    /its tensor 2 \(in the walk's order\) was disposed/,
  );
  assert.equal(other?.disposed, false);
});
