/**
 * `MirrorWalk` on its own, over tensors bound to a stand-in device block
 * (no CUDA call is made: the walk reads addresses and binds outputs): it
 * takes what the transfer's run finder (transfer/mirror_runs.ts) would put
 * in one run, with each output at the run's place for it, and turns off at
 * anything else. (Its copies on a GPU, against the plain path:
 * tests/gpu/mirror_walk_test.ts.)
 */

import { TensorLayout } from "../src/tensor_layout.ts";
import assert from "node:assert/strict";
import type { BlockPool } from "../src/memory/block_pool.ts";
import type { Block } from "../src/memory/block_pool_types.ts";
import { pinnedPool } from "../src/memory/pinned_memory.ts";
import { Storage } from "../src/memory/storage.ts";
import {
  MAX_DEVICE_RUN_GAP,
  MIRROR_BASE_ALIGNMENT,
  MirrorWalk,
  resetMirrorWalks,
} from "../src/mirror_walk.ts";
import { CHUNK_BASE_ALIGNMENT } from "../src/transfer/chunks.ts";
import { findRuns } from "../src/transfer/mirror_runs.ts";
import { Tensor, tensorInternals } from "../src/tensor.ts";
import { NOT_TAKEN } from "../src/walk/leaf_sink.ts";

const LIMITS = { leafLimit: 256 * 1024, chunkLimit: 1 << 20 };

/** A stand-in device block at `address` (nothing is ever freed). */
function deviceBlock(address: number): Storage {
  const pool = { release() {} } as unknown as BlockPool;
  return new Storage(pool, { address, size: 1 << 24 } as Block, 1 << 20);
}

/** A tensor of `bytes` on `device` (cuda:0 by default) at `offset` in `storage`. */
function onDevice(storage: Storage, offset: number, bytes: number, device = 0): Tensor {
  return tensorInternals.createBound(
    new TensorLayout("uint8", Object.freeze([bytes]), bytes, device),
    storage,
    offset,
  );
}

function walkOf(onTakeOver: () => void = () => {}) {
  const columns = { leaves: [] as unknown[], outputs: [] as Tensor[] };
  const walk = new MirrorWalk(LIMITS, columns, () => Storage.pending(pinnedPool), onTakeOver);
  return { walk, columns };
}

Deno.test("a mirror walk takes a result's tensors in order in one block, each output where the run's block will hold it", () => {
  resetMirrorWalks();
  // The block's address is not a multiple of 256: the run keeps each
  // output's alignment through `lead`.
  const block = deviceBlock(0x7f0000100 + 48);
  // An empty leaf joins wherever it lies (bound at the block's first byte).
  const leaves = [[0, 12], [16, 16], [32, 4], [4096, 0], [48, 100], [160, 8]].map((
    [offset, bytes],
  ) => onDevice(block, offset, bytes));
  const { walk, columns } = walkOf();
  const outputs = leaves.map((leaf) => walk.tensor(leaf));
  const run = walk.finish()!;
  const start = block.address;
  assert.equal(run.start, start);
  assert.equal(run.bytes, 168);
  assert.equal(run.lead, start % MIRROR_BASE_ALIGNMENT);
  assert.equal(run.count, 6);
  assert.equal(run.source, 0);
  assert.equal(run.input, block);
  outputs.forEach((output, i) => {
    assert.ok(output instanceof Tensor);
    assert.equal(output.device, "cpu");
    assert.equal(output.byteLength, leaves[i].byteLength);
    // A pending storage's address is 0: the output's address is its offset in the block.
    const at = leaves[i].byteLength === 0
      ? 0
      : tensorInternals.address(leaves[i]) - start + run.lead;
    assert.equal(tensorInternals.address(output), at);
    assert.equal(columns.leaves[i], leaves[i]);
    assert.equal(columns.outputs[i], output);
  });
});

Deno.test("a mirror walk takes exactly what the run finder puts in one run of every leaf (random layouts)", () => {
  let seed = 12345;
  const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  let taken = 0;
  for (let trial = 0; trial < 3000; trial++) {
    resetMirrorWalks();
    const blocks = [deviceBlock(1 << 20), deviceBlock(1 << 26)];
    const leaves: Tensor[] = [];
    let offset = random(64);
    const n = 2 + random(12);
    for (let i = 0; i < n; i++) {
      // Mostly a packed result's layout; now and then a leaf too large, a
      // wide gap, one out of order or overlapping, another block, an empty one.
      const kind = random(40);
      const bytes = kind === 0 ? 300_000 : kind === 1 ? 0 : 1 + random(200);
      const storage = kind === 2 ? blocks[1] : blocks[0];
      if (kind === 3) offset += MAX_DEVICE_RUN_GAP + 1 + random(50);
      if (kind === 4) offset = Math.max(0, offset - 1 - random(40));
      leaves.push(onDevice(storage, offset, bytes));
      offset += bytes + random(3) * 8;
    }
    const { walk } = walkOf();
    const outputs = leaves.map((leaf) => walk.tensor(leaf));
    const run = walk.finish();
    const runs = findRuns({
      options: { maxPackedChunkBytes: LIMITS.chunkLimit },
      outputs: leaves,
      sourceAddress: (i) => tensorInternals.address(leaves[i]),
      sourceStorage: (i) => tensorInternals.storage(leaves[i]),
      inputStorages: () => blocks,
    }, leaves.map((_, i) => i));
    const oneRun = runs !== undefined && runs.ranges.length === 1 && runs.ranges[0].count === n;
    assert.equal(run !== undefined, oneRun, `trial ${trial}`);
    if (run === undefined) continue;
    taken++;
    assert.deepEqual(
      { start: run.start, end: run.start + run.bytes, count: run.count },
      runs!.ranges[0],
    );
    outputs.forEach((output, i) => {
      const address = runs!.addressOf[i];
      assert.equal(
        tensorInternals.address(output as Tensor),
        address < 0 ? 0 : address - run.start + run.lead,
      );
    });
  }
  // Both outcomes were tried often.
  assert.ok(taken > 300 && taken < 2700, `${taken} of 3000 taken`);
});

Deno.test("a mirror walk turns off at a leaf that would not join its run, and the route takes over once", () => {
  const block = deviceBlock(1 << 20);
  const other = deviceBlock(1 << 24);
  const disposed = onDevice(block, 64, 4);
  disposed.dispose();
  const cases: [string, unknown][] = [
    ["another block", onDevice(other, 64, 4)],
    ["out of order", onDevice(block, 8, 4)],
    ["past the gap", onDevice(block, 32 + MAX_DEVICE_RUN_GAP + 1, 4)],
    ["too large", onDevice(block, 64, 300_000)],
    ["past the chunk limit", onDevice(block, (1 << 20) - 8, 16)],
    ["empty, on another device", onDevice(block, 64, 0, 1)],
    ["a CPU tensor", Tensor.from(new Float32Array(2))],
    ["a TypedArray", new Float32Array(2)],
    ["a disposed tensor", disposed],
  ];
  for (const [what, leaf] of cases) {
    resetMirrorWalks();
    let takenOver = 0;
    const { walk } = walkOf(() => takenOver++);
    assert.ok(walk.tensor(onDevice(block, 0, 16)) instanceof Tensor, what);
    assert.ok(walk.tensor(onDevice(block, 16, 16)) instanceof Tensor, what);
    const taken = leaf instanceof Tensor ? walk.tensor(leaf) : walk.array(leaf as Float32Array, 0);
    assert.equal(taken, NOT_TAKEN, what);
    assert.equal(takenOver, 1, what);
    assert.equal(walk.on, false, what);
    assert.equal(walk.count, 2, what);
    assert.equal(walk.tensor(onDevice(block, 32, 16)), NOT_TAKEN, what);
    assert.equal(walk.finish(), undefined, what);
    assert.equal(takenOver, 1, what);
  }
});

Deno.test("a mirror walk of one leaf hands it over at its end; one of none takes nothing; an empty first leaf turns it off", () => {
  resetMirrorWalks();
  let takenOver = 0;
  const { walk } = walkOf(() => takenOver++);
  walk.tensor(onDevice(deviceBlock(1 << 20), 0, 8));
  assert.equal(walk.finish(), undefined);
  assert.equal(takenOver, 1);
  const none = walkOf(() => takenOver++);
  assert.equal(none.walk.finish(), undefined);
  assert.equal(takenOver, 1);
  const empty = walkOf(() => takenOver++);
  assert.equal(empty.walk.tensor(onDevice(deviceBlock(1 << 20), 0, 0)), NOT_TAKEN);
  assert.equal(empty.walk.on, false);
  assert.equal(takenOver, 1); // nothing to take over
});

Deno.test("a structure's mirror walks pause after two hand-overs in a row (a lone leaf's is none), another structure's do not; the base alignment is the chunks'", () => {
  resetMirrorWalks();
  const block = deviceBlock(1 << 20);
  // The state a structure's compiled plan keeps for its walks.
  const state = {};
  // Copies back of one tensor each: handed over at the end, never a pause.
  for (let i = 0; i < 3; i++) {
    const { walk } = walkOf(() => walk.handOver());
    assert.ok(walk.begin(state));
    walk.tensor(onDevice(block, 0, 8));
    assert.equal(walk.finish(), undefined);
  }
  for (let i = 0; i < 2; i++) {
    const { walk } = walkOf(() => walk.handOver());
    assert.ok(walk.begin(state));
    walk.tensor(onDevice(block, 0, 8));
    walk.tensor(onDevice(block, 4, 8)); // out of order
  }
  let paused = 0;
  while (!walkOf().walk.begin(state)) paused++;
  assert.equal(paused, 63);
  assert.ok(walkOf().walk.begin({}), "another structure is not paused");
  // Paused, then forgotten (for tests): the structure walks again.
  walkOf(() => {}).walk.begin(state);
  for (let i = 0; i < 2; i++) {
    const { walk } = walkOf(() => walk.handOver());
    walk.begin(state);
    walk.tensor(onDevice(block, 0, 8));
    walk.tensor(onDevice(block, 4, 8));
  }
  const pausedWalk = walkOf().walk;
  assert.equal(pausedWalk.begin(state), false);
  assert.equal(pausedWalk.on, false, "a paused walk turns itself off");
  resetMirrorWalks();
  assert.ok(walkOf().walk.begin(state));
  assert.equal(MIRROR_BASE_ALIGNMENT, CHUNK_BASE_ALIGNMENT);
});
