import assert from "node:assert/strict";
import { resolveOptions } from "../src/options.ts";

Deno.test("resolveOptions() applies the defaults of the API contract", () => {
  assert.deepEqual(resolveOptions(undefined), {
    usePinnedStaging: true,
    packCpuTensors: true,
    minPackedAlignmentBytes: 16,
    maxPackedChunkBytes: 32 * 1024 * 1024,
    useBackgroundThread: true,
  });
  assert.equal(resolveOptions({ packCpuTensors: false }).packCpuTensors, false);
  assert.equal(resolveOptions({ minPackedAlignmentBytes: 6 }).minPackedAlignmentBytes, 6);
});

Deno.test("resolveOptions() throws RangeError for numbers out of range", () => {
  for (const value of [0, -1, 2.5, NaN, Infinity, 2 ** 53]) {
    assert.throws(() => resolveOptions({ minPackedAlignmentBytes: value }), RangeError);
    assert.throws(() => resolveOptions({ maxPackedChunkBytes: value }), RangeError);
  }
});

Deno.test("resolveOptions() throws TypeError for wrong types and unknown keys", () => {
  assert.throws(() => resolveOptions({ usePinnedStaging: 1 as unknown as boolean }), TypeError);
  assert.throws(() => resolveOptions({ maxPackedChunkBytes: "8" as unknown as number }), TypeError);
  assert.throws(() => resolveOptions({ pinStaging: true } as never), {
    name: "TypeError",
    message: /Invalid option "pinStaging"/,
  });
  assert.throws(() => resolveOptions(null as never), TypeError);
});

Deno.test("resolveOptions() reads own options only: keys on Object.prototype change no copy", () => {
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.usePinnedStaging = "yes";
  prototype.maxPackedChunkBytes = 1;
  try {
    // Was: TypeError "Invalid option usePinnedStaging: expected a boolean, got yes".
    const resolved = resolveOptions({});
    assert.equal(resolved.usePinnedStaging, true);
    assert.equal(resolved.maxPackedChunkBytes, 32 * 1024 * 1024);
    assert.equal(resolveOptions({ usePinnedStaging: false }).usePinnedStaging, false);
  } finally {
    delete prototype.usePinnedStaging;
    delete prototype.maxPackedChunkBytes;
  }
});
