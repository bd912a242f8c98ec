import assert from "node:assert/strict";
import { startCopy } from "../../mod.ts";
import type { Storage } from "../../src/memory/storage.ts";
import { afterOption, OrderedRelease } from "../../src/gpu/ordered_release.ts";

// The ordered release on the CPU: its option, its check, and host memory
// not held after a copy that is done. Memory ordered after GPU work:
// tests/gpu/ordering_test.ts and lifetime_test.ts, on a GPU.

Deno.test("afterOption: no options is no after; an own `after` is read, an inherited one is not", () => {
  assert.equal(afterOption(undefined), undefined);
  assert.equal(afterOption({}), undefined);
  const handle = startCopy([new Float32Array(1)], "cpu");
  assert.equal(afterOption({ after: handle }), handle);
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.after = handle;
  try {
    assert.equal(afterOption({}), undefined);
  } finally {
    delete prototype.after;
  }
});

Deno.test("afterOption: options that are not an object are a TypeError naming them", () => {
  for (const [options, shownAs] of [[null, "null"], [5, "5"], ["after", "after"]] as const) {
    assert.throws(() => afterOption(options), {
      name: "TypeError",
      message: `Invalid options ${shownAs}: expected an object`,
    });
  }
  assert.throws(() => afterOption(Symbol("o")), {
    name: "TypeError",
    message: "Invalid options Symbol(o): expected an object",
  });
});

Deno.test("OrderedRelease: an after that is no work is a TypeError naming the option", () => {
  assert.throws(() => new OrderedRelease(5, "options.after"), {
    name: "TypeError",
    message: "Invalid options.after: expected an AsyncCopyHandle, a GpuWork or a CudaStream, got 5",
  });
});

/** A storage that counts its holds (the release takes and gives them back). */
function countingStorage(): Storage & { holds: number } {
  const counted = {
    holds: 0,
    retain: () => void counted.holds++,
    release: () => void counted.holds--,
  };
  return counted as unknown as Storage & { holds: number };
}

Deno.test("OrderedRelease.order(): host memory after a copy already settled is not held", async () => {
  const handle = startCopy([new Float32Array(4)], "cpu");
  await handle.get();
  const storage = countingStorage();
  new OrderedRelease(handle, "options.after").order(storage, -1);
  assert.equal(storage.holds, 0);
});

Deno.test("OrderedRelease.order(): memory of neither a pool nor an arena is left alone", () => {
  const handle = startCopy([new Float32Array(4)], "cpu");
  new OrderedRelease(handle, "options.after").order(undefined, -1);
  return handle.get().then(() => {});
});
