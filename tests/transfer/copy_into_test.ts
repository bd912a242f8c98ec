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
