import assert from "node:assert/strict";
import { checkHolds } from "../../../src/transfer/into/holds.ts";
import { buildRecord } from "../../../src/transfer/into/record.ts";
import { tensorInternals } from "../../../src/tensor.ts";
import { TensorLayout } from "../../../src/tensor_layout.ts";
import { vectorShape } from "../../../src/vector_shape.ts";
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

Deno.test("checkHolds reads the result's tensors again only once a tensor over their storages was disposed", () => {
  const { result: made, chunk } = madeResult();
  // With an empty tensor (no storage: in no group), read every time.
  const empty = tensorInternals.create(new TensorLayout("float32", vectorShape(0), 0, CUDA0));
  const result = { ...made, empty };
  const record = buildRecord(result, CUDA0);
  assert.deepEqual(record.ungrouped, [3]);
  // Reads of `disposed` by the check, counted through a stand-in list.
  const reads = [0, 0, 0, 0];
  const tensors = record.shape.tensors.map((tensor, n) => ({
    get disposed() {
      reads[n]++;
      return tensor.disposed;
    },
  }));
  const check = () => checkHolds(record.groups, tensors, record.ungrouped);
  check();
  assert.deepEqual(reads, [1, 1, 1, 1]);
  check();
  assert.deepEqual(reads, [1, 1, 1, 2], "nothing disposed since: the empty tensor only");
  // A tensor of the user's over the chunk, disposed: read again (and alive).
  const other = tensorInternals.share(result.boxes);
  other.dispose();
  check();
  assert.deepEqual(reads, [2, 2, 2, 3]);
  // The empty tensor disposed: refused.
  empty.dispose();
  assert.throws(check, /its tensor 3 \(in the walk's order\)/);
  // A result tensor disposed, and its hold made up by another's: refused.
  result.ids.dispose();
  chunk.retain();
  assert.throws(check, /its tensor 1 \(in the walk's order\)/);
});

Deno.test("checkHolds finds a tensor a disposal in progress marked, before that disposal drops its holds", () => {
  // A getter of the result run by disposeAll may start a copy into it: the
  // tensors marked so far must read as disposed, though their holds are
  // dropped only when the disposal ends.
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  checkHolds(record.groups, record.shape.tensors, record.ungrouped);
  const batch = tensorInternals.beginDisposal();
  try {
    tensorInternals.disposeInBatch(result.boxes, batch);
    assert.throws(
      () => checkHolds(record.groups, record.shape.tensors, record.ungrouped),
      /its tensor 0 \(in the walk's order\) was disposed/,
    );
  } finally {
    tensorInternals.endDisposal(batch);
  }
});
