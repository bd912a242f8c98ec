import assert from "node:assert/strict";
import { Tensor } from "../../../mod.ts";
import { buildRecord } from "../../../src/transfer/into/record.ts";
import { CUDA0, madeResult } from "./_result.ts";

// A result's record: its tensors' dtypes and bytes, grouped by the storage
// they lie in, each group covering the byte range of its tensors.

Deno.test("buildRecord groups the result's tensors by storage, each group spanning its tensors", () => {
  const { result, chunk, own } = madeResult();
  const record = buildRecord(result, CUDA0);
  assert.deepEqual(record.shape.tensors, [result.boxes, result.ids, result.big]);
  assert.deepEqual(record.dtypes, ["float32", "int64", "uint8"]);
  assert.deepEqual([...record.byteLengths], [32, 24, 100]);
  assert.equal(record.bytes, 156);
  assert.deepEqual(record.storages, [chunk, chunk, own]);
  assert.deepEqual([...record.offsets], [0, 64, 0]);
  assert.deepEqual([...record.groupOf], [0, 0, 1]);
  assert.deepEqual(
    record.groups.map(({ storage, leaves, lo, hi }) => ({ storage, leaves, lo, hi })),
    [{ storage: chunk, leaves: [0, 1], lo: 0, hi: 88 }, {
      storage: own,
      leaves: [2],
      lo: 0,
      hi: 100,
    }],
  );
  assert.equal(typeof record.check, "function"); // no Map: compiled
  assert.deepEqual([record.ledger.tensors, record.ledger.bytes, record.ledger.target], [3, 156, 0]);
  assert.deepEqual(record.ledger.outputs, []); // a failed copy disposes nothing of the result
});

Deno.test("buildRecord refuses a value whose tensors are not the library's on the target", () => {
  const { result } = madeResult();
  const cases: [object, number, RegExp][] = [
    [result, 1, /\$\.boxes is a tensor on cuda:0, not cuda:1/],
    [{ x: Tensor.from(new Float32Array(2)) }, CUDA0, /\$\.x is a tensor on cpu, not cuda:0/],
    [{ a: 1 }, CUDA0, /it holds no tensor/],
  ];
  for (const [value, device, message] of cases) {
    assert.throws(
      () => buildRecord(value, device),
      (error: unknown) =>
        error instanceof Error && !(error instanceof TypeError) &&
        /^Cannot copy into this value: /.test(error.message) && message.test(error.message),
      String(message),
    );
  }
  result.ids.dispose();
  assert.throws(() => buildRecord(result, CUDA0), /\$\.ids is a disposed tensor/);
});
