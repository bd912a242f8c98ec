import assert from "node:assert/strict";
import { Tensor } from "../../../mod.ts";
import {
  knownLeaves,
  NOT_KNOWN,
  noteLeaf,
  sameLeaves,
  sameLeavesCounts,
  startRead,
} from "../../../src/transfer/into/known.ts";

// What a copy into a result keeps of the leaves it read, and when a later
// copy of the same leaves may skip reading them again.

/** A complete read of `leaves` (each its own bytes), as into/leaves.ts makes one. */
function read(leaves: (Float32Array | Tensor)[]) {
  const known = knownLeaves(leaves.length);
  startRead(known);
  const views = leaves.map((x) => x instanceof Tensor ? x.toTypedArray() : x);
  leaves.forEach((x, n) => noteLeaf(known, n, x, views[n]));
  known.complete = true;
  const byteLengths = new Float64Array(views.map((view) => view.byteLength));
  return { known, same: () => sameLeaves(known, leaves, views, byteLengths) };
}

Deno.test("known leaves: neighbours in one buffer record it once; the same leaves are found by it", () => {
  const arena = new ArrayBuffer(256);
  const leaves = [0, 16, 32].map((at) => new Float32Array(arena, at, 4));
  const { known, same } = read([...leaves, Tensor.from(new Float32Array(arena, 64, 4))]);
  assert.deepEqual(known.buffers, [arena]);
  const before = sameLeavesCounts.byBuffers;
  assert.equal(same(), true);
  assert.equal(sameLeavesCounts.byBuffers, before + 1);
});

Deno.test("known leaves: a detached buffer, a disposed tensor or another leaf is not the same", () => {
  const own = new Float32Array(4);
  const tensor = Tensor.from(new Float32Array(4));
  const { known, same } = read([own, tensor]);
  assert.equal(same(), true);
  structuredClone(own.buffer, { transfer: [own.buffer as ArrayBuffer] });
  assert.equal(same(), false);
  const second = read([new Float32Array(4), tensor]);
  tensor.dispose();
  assert.equal(second.same(), false);
  // Not known: a position the read did not take.
  noteLeaf(known, 0, own, undefined);
  assert.equal(known.leaves[0], NOT_KNOWN);
});

Deno.test("known leaves: a resizable buffer is checked leaf by leaf, and its resize found", () => {
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const view = new Float32Array(buffer, 0, 4);
  const { known, same } = read([view]);
  assert.equal(known.buffers, undefined);
  const before = sameLeavesCounts.byLeaves;
  assert.equal(same(), true);
  assert.equal(sameLeavesCounts.byLeaves, before + 1);
  buffer.resize(8);
  assert.equal(same(), false);
});

Deno.test("known leaves: a disposal of any host tensor since the read sends the check leaf by leaf", () => {
  const { same } = read([new Float32Array(4)]);
  Tensor.from(new Float32Array(1)).dispose();
  const before = { ...sameLeavesCounts };
  assert.equal(same(), true);
  assert.deepEqual(sameLeavesCounts, { ...before, byLeaves: before.byLeaves + 1 });
});
