import assert from "node:assert/strict";
import { startCopy } from "../../mod.ts";
import { checkAfter, notQueuedYet } from "../../src/gpu/after.ts";

// The checks of `after` that need no GPU (an AsyncCopyHandle of a CPU copy
// is real work to order after; GPU work and streams are tested in
// tests/gpu/ordering_test.ts and not_queued_test.ts).

Deno.test("checkAfter: one item is returned as a list of one", () => {
  const handle = startCopy([new Float32Array(1)], "cpu");
  assert.deepEqual(checkAfter(handle, "after"), [handle]);
  assert.deepEqual(checkAfter([handle, handle], "after", true), [handle, handle]);
});

Deno.test("checkAfter: a list where none is allowed is refused as one item, without the list's hint", () => {
  const handle = startCopy([new Float32Array(1)], "cpu");
  assert.throws(() => checkAfter([handle], "options.after"), {
    name: "TypeError",
    message:
      "Invalid options.after: expected an AsyncCopyHandle, a GpuWork or a CudaStream, got Array",
  });
});

Deno.test("checkAfter: a bad item of a list is named by its index", () => {
  const handle = startCopy([new Float32Array(1)], "cpu");
  assert.throws(() => checkAfter([handle, "x"], "after", true), {
    name: "TypeError",
    message:
      'Invalid after[1]: expected an AsyncCopyHandle, a GpuWork or a CudaStream (or an array of them), got "x"',
  });
  assert.throws(() => checkAfter([handle, , handle], "after", true), {
    name: "TypeError",
    message: /^Invalid after\[1\]:.*got undefined$/,
  });
});

Deno.test("checkAfter: the items returned are a copy, unchanged by later changes to the list", () => {
  const handle = startCopy([new Float32Array(1)], "cpu");
  const list = [handle];
  const items = checkAfter(list, "after", true);
  list.push("not checked" as never);
  assert.deepEqual(items, [handle]);
});

Deno.test({
  name: "checkAfter: an object whose constructor getter throws is a TypeError naming the argument",
  fn() {
    const hostile = {
      get constructor(): never {
        throw new Error("from the getter");
      },
    };
    assert.throws(() => checkAfter(hostile, "after"), {
      name: "TypeError",
      message: /^Invalid after: expected an AsyncCopyHandle/,
    });
  },
});

Deno.test("notQueuedYet: nothing to wait for without items or stream, nor after CPU copies", async () => {
  assert.equal(notQueuedYet(undefined), undefined);
  assert.equal(notQueuedYet([]), undefined);
  const handle = startCopy([new Float32Array(1)], "cpu");
  await handle.get();
  assert.equal(notQueuedYet([handle]), undefined);
});
