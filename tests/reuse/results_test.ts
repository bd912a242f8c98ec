import assert from "node:assert/strict";
import { resultEntry } from "../../src/reuse/results.ts";

// A result copied into has one entry per device it was copied to last: the
// record and the busy flag live as long as the result does.

Deno.test("resultEntry returns the same entry for a result and device, so its record is kept", () => {
  const result = {};
  const entry = resultEntry(result, 0);
  assert.deepEqual([entry.device, entry.record, entry.busy], [0, undefined, false]);
  entry.record = "built once";
  entry.busy = true;
  assert.equal(resultEntry(result, 0), entry);
  assert.equal(resultEntry(result, 0).record, "built once");
});

Deno.test("resultEntry keys on the result itself: another object of the same contents has its own", () => {
  const a = { x: 1 }, b = { x: 1 };
  assert.notEqual(resultEntry(a, 0), resultEntry(b, 0));
});

Deno.test("resultEntry for another device starts afresh (a record is for one device's tensors)", () => {
  const result = {};
  const first = resultEntry(result, 0);
  first.record = "device 0's";
  first.busy = true;
  const second = resultEntry(result, 1);
  assert.notEqual(second, first);
  assert.deepEqual([second.device, second.record, second.busy], [1, undefined, false]);
  assert.equal(resultEntry(result, 1), second);
});
