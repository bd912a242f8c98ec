/**
 * `PackedWalk` on its own, over blocks of ordinary memory: it places leaves
 * as the sequential packer does, copies their bytes there, and turns off
 * at the first leaf it cannot take. (Its copies on a GPU, against the plain
 * path: tests/gpu/packed_walk_test.ts.)
 */

import assert from "node:assert/strict";
import { deviceCount, hostArena } from "../mod.ts";
import { arrayCodeOf } from "../src/array_code.ts";
import type { Block } from "../src/memory/block_pool_types.ts";
import { Storage } from "../src/memory/storage.ts";
import { pinnedPool } from "../src/memory/pinned_memory.ts";
import { resolveOptions } from "../src/options.ts";
import { SequentialPacker } from "../src/pack_plan.ts";
import { type PackedStages, PackedWalk, resetPackedWalks } from "../src/packed_walk.ts";
import { Tensor, tensorInternals } from "../src/tensor.ts";
import type { TypedArray } from "../src/dtype.ts";
import { NOT_TAKEN } from "../src/walk/leaf_sink.ts";

/** Blocks of ordinary memory standing in for pinned ones, and what was taken back. */
function stages(): PackedStages & {
  taken: number;
  given: number;
  memory: Map<Block, ArrayBuffer>;
} {
  const memory = new Map<Block, ArrayBuffer>();
  return {
    memory,
    taken: 0,
    given: 0,
    acquire(bytes) {
      this.taken++;
      const block = { address: 0, size: bytes } as Block;
      memory.set(block, new ArrayBuffer(bytes));
      return block;
    },
    release() {
      this.given++;
    },
    view: (block, cls) => new cls(memory.get(block)!),
    viewsByCode: () => [],
    pinnedPending: () => Storage.pending(pinnedPool),
  };
}

function walkOf(capacity: number, onTakeOver: () => void = () => {}) {
  const columns = {
    leaves: [] as unknown[],
    outputs: [] as Tensor[],
    fromArena: [] as number[],
    arenaOffsets: [] as number[],
  };
  const source = stages();
  const walk = new PackedWalk(
    0,
    { align: 16, limit: 256 * 1024, chunkLimit: capacity },
    source,
    columns,
    () => Storage.pending(pinnedPool),
    onTakeOver,
  );
  // A structure seen for the first time: its block is the smallest (64 KB), at most `capacity`.
  assert.ok(walk.begin({}));
  return { walk, columns, source };
}

const leavesOf = (count: number): TypedArray[] =>
  Array.from({ length: count }, (_, i) => {
    const classes = [Float32Array, Uint8Array, BigInt64Array, Int16Array, Float64Array];
    const cls = classes[i % classes.length];
    const array = new cls((i * 7) % 13) as TypedArray;
    new Uint8Array(array.buffer).forEach((_, k, all) => all[k] = (i * 31 + k) & 255);
    return array;
  });

Deno.test("a packed walk places leaves where the sequential packer does, and copies their bytes there", () => {
  resetPackedWalks();
  const { walk, columns, source } = walkOf(64 * 1024);
  const packer = new SequentialPacker(resolveOptions({ minPackedAlignmentBytes: 16 }));
  const leaves = leavesOf(40);
  leaves.forEach((leaf, i) => {
    const output = walk.array(leaf, arrayCodeOf(leaf));
    assert.ok(output instanceof Tensor);
    const offset = packer.place(i, leaf.byteLength);
    // A pending storage's address is 0: the output's address is its offset.
    assert.equal(tensorInternals.address(output), offset);
    assert.equal(output.device, "cuda:0");
    assert.equal(output.byteLength, leaf.byteLength);
    assert.equal(columns.leaves[i], leaf);
  });
  const chunk = walk.finish()!;
  assert.ok("block" in chunk);
  assert.equal(chunk.count, 40);
  assert.equal(chunk.bytes, packer.end);
  const staged = new Uint8Array(source.memory.get(chunk.block)!);
  leaves.forEach((leaf, i) => {
    const at = packer.offsets.view()[i];
    assert.deepEqual(
      staged.subarray(at, at + leaf.byteLength),
      new Uint8Array(leaf.buffer, leaf.byteOffset, leaf.byteLength),
    );
  });
  assert.equal(source.given, 0); // the block goes to the copy, not back
  packer.dispose();
});

Deno.test("a packed walk takes a CPU tensor with its dtype and shape, and turns off at a disposed one", () => {
  resetPackedWalks();
  let takenOver = 0;
  const { walk } = walkOf(64 * 1024, () => takenOver++);
  const bf16 = Tensor.from(new Uint16Array(6), [2, 3], "bfloat16");
  const output = walk.tensor(bf16);
  assert.ok(output instanceof Tensor);
  assert.equal(output.dtype, "bfloat16");
  assert.deepEqual(output.shape, [2, 3]);
  const disposed = Tensor.from(new Float32Array(2));
  disposed.dispose();
  assert.equal(walk.tensor(disposed), NOT_TAKEN);
  assert.equal(takenOver, 1);
  assert.equal(walk.on, false);
  // Off: nothing more is taken, and the take-over is not repeated.
  assert.equal(walk.tensor(bf16), NOT_TAKEN);
  assert.equal(walk.array(new Float32Array(1), arrayCodeOf(new Float32Array(1))), NOT_TAKEN);
  assert.equal(takenOver, 1);
});

Deno.test("a packed walk turns off at the first leaf past its block, and gives the block back", () => {
  resetPackedWalks();
  let takenOver = 0;
  const { walk, source } = walkOf(64 * 1024, () => {
    takenOver++;
    walk.handOver();
  });
  const small = new Float32Array(1024); // 4 KB
  for (let i = 0; i < 15; i++) assert.ok(walk.array(small, arrayCodeOf(small)) instanceof Tensor);
  const large = new Float32Array(4096); // 16 KB: past 64 KB
  assert.equal(walk.array(large, arrayCodeOf(large)), NOT_TAKEN);
  assert.equal(takenOver, 1);
  assert.equal(walk.count, 15);
  assert.equal(source.taken, 1);
  assert.equal(source.given, 1);
  assert.equal(walk.finish(), undefined);
  assert.equal(source.given, 1);
});

Deno.test("a packed walk that took nothing takes no block", () => {
  const { walk, source } = walkOf(64 * 1024);
  assert.equal(walk.finish(), undefined);
  walk.abandon();
  assert.equal(source.taken, 0);
});

// Without a driver a host arena is ordinary memory, and its tensors are plain CPU tensors.
const noArenas = deviceCount() === 0;

Deno.test({
  name:
    "a walk whose first leaf lies in a host arena records that arena's tensors as the route does, in any order",
  ignore: noArenas,
  fn() {
    resetPackedWalks();
    using arena = hostArena(64 * 1024);
    const [a, b, c] = [arena.float32(10), arena.uint8(3), arena.float64(4)];
    let takenOver = 0;
    const { walk, columns, source } = walkOf(64 * 1024, () => takenOver++);
    // Not in the arena's order: the transfer sorts them (transfer/from_arena.ts).
    const leaves = [Tensor.from(c), Tensor.from(a), Tensor.from(b, [3], "bool")];
    const outputs = leaves.map((leaf) => walk.tensor(leaf));
    assert.equal(walk.arena, tensorInternals.arena(leaves[0]));
    assert.deepEqual(columns.fromArena, [0, 1, 2]);
    assert.deepEqual(columns.arenaOffsets, [c.byteOffset, a.byteOffset, b.byteOffset]);
    outputs.forEach((output, i) => {
      assert.ok(output instanceof Tensor);
      // Bound at its offset in the arena (a pending storage's address is 0).
      assert.equal(tensorInternals.address(output), columns.arenaOffsets[i]);
      assert.equal(output.dtype, leaves[i].dtype);
      assert.deepEqual(output.shape, leaves[i].shape);
      assert.equal(columns.leaves[i], leaves[i]);
    });
    assert.equal(walk.bytes, a.byteLength + b.byteLength + c.byteLength);
    const run = walk.finish();
    assert.ok(run !== undefined && "arena" in run);
    assert.equal(run.arena, walk.arena);
    assert.equal(takenOver, 0);
    assert.equal(source.taken, 0); // nothing staged
  },
});

Deno.test({
  name:
    "an arena walk turns off at a leaf of another arena or of ordinary memory, and a packing walk at an arena tensor",
  ignore: noArenas,
  fn() {
    using one = hostArena(4096);
    using two = hostArena(4096);
    const cases: [unknown, unknown][] = [
      [Tensor.from(one.float32(2)), Tensor.from(two.float32(2))],
      [Tensor.from(one.float32(2)), Tensor.from(new Float32Array(2))],
      [Tensor.from(one.float32(2)), new Float32Array(2)],
      [Tensor.from(new Float32Array(2)), Tensor.from(one.float32(2))],
    ];
    for (const [first, second] of cases) {
      resetPackedWalks();
      let takenOver = 0;
      const { walk, columns } = walkOf(64 * 1024, () => takenOver++);
      assert.ok(walk.tensor(first as Tensor) instanceof Tensor);
      const taken = second instanceof Tensor
        ? walk.tensor(second)
        : walk.array(second as TypedArray, arrayCodeOf(second as TypedArray));
      assert.equal(taken, NOT_TAKEN);
      assert.equal(takenOver, 1);
      assert.equal(walk.count, 1);
      assert.equal(columns.fromArena.length, walk.arena === undefined ? 0 : 1);
    }
  },
});
