import assert from "node:assert/strict";
import { checkHolds } from "../../../src/transfer/into/holds.ts";
import { buildRecord } from "../../../src/transfer/into/record.ts";
import { CUDA0, madeResult } from "./_result.ts";

// A copy writes into a result only where its storages have exactly the
// holds of the result's own tensors (and of work it can wait for).

Deno.test("checkHolds: a result whose storages only its tensors hold needs no wait", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  assert.deepEqual(checkHolds(record.groups, record.shape.tensors), []);
});

Deno.test("checkHolds refuses a storage someone else holds, counting the holds too many", () => {
  const { result, chunk } = madeResult();
  const record = buildRecord(result, CUDA0);
  chunk.retain(); // a tensor over the same memory
  assert.throws(
    () => checkHolds(record.groups, record.shape.tensors),
    (error: unknown) =>
      error instanceof Error &&
      /^Cannot copy into this result: something else holds its memory \(1 more hold: /.test(
        error.message,
      ),
  );
  chunk.retain();
  assert.throws(() => checkHolds(record.groups, record.shape.tensors), /\(2 more holds: /);
  chunk.release();
  chunk.release();
  assert.deepEqual(checkHolds(record.groups, record.shape.tensors), []);
});

Deno.test("checkHolds names a disposed tensor of the result by its place in the walk", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  result.big.dispose(); // its storage lost a hold
  assert.throws(
    () => checkHolds(record.groups, record.shape.tensors),
    /^Error: Cannot copy into this result: its tensor 2 \(in the walk's order\) was disposed$/,
  );
});
