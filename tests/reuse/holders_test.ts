import assert from "node:assert/strict";
import { copiesReading, readingEnded, readingStarted } from "../../src/reuse/holders.ts";

// Kernel launches' holds are noted by Kernel.launch (tests/gpu/copy_into_test.ts
// shows a copy into a result waiting for them); copies' reads are counted here.

Deno.test("copies reading a storage are counted, once per hold", () => {
  const a = {}, b = {};
  readingStarted([a, b, a]);
  assert.equal(copiesReading(a as never), 2);
  assert.equal(copiesReading(b as never), 1);
  readingEnded([a, b]);
  assert.equal(copiesReading(a as never), 1);
  assert.equal(copiesReading(b as never), 0);
  readingEnded([a]);
  assert.equal(copiesReading(a as never), 0);
});
