/**
 * `deno bench` for what the CPU alone decides: traversal, planning, packing
 * into host memory, and output construction (the CPU target). Each group
 * has a naive per-tensor baseline that does the same work; planning has
 * none (nothing else plans a packing), so it is timed alone.
 *
 * Run: `deno task bench`
 *
 * @module
 */

import { startCopy, Tensor, type TypedArray } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";
import { packCandidates, planPacking } from "../src/pack_plan.ts";
import { DTYPE_SIZE } from "../src/dtype.ts";
import { collectLeaves } from "../src/walk/collect_leaves.ts";
import { walk } from "../src/walk/walk.ts";

const batch = createBatchMetaData(16);
const leaves = collectLeaves(batch) as Tensor[];
const arrays: TypedArray[] = leaves.map((t) => t.toTypedArray());
const sizes = leaves.map((t) => t.byteLength);
const elementSizes = leaves.map((t) => DTYPE_SIZE[t.dtype]);
const options = { minPackedAlignmentBytes: 16, maxPackedChunkBytes: 32 * 1024 * 1024 };

Deno.bench({
  name: "naive: structuredClone of the batch (per-tensor copies)",
  group: "traverse",
  baseline: true,
  fn: () => {
    structuredClone(arrays);
  },
});
Deno.bench({
  name: "walk(): 528 leaves, containers rebuilt",
  group: "traverse",
  fn: () => {
    walk(batch, { add: (leaf) => leaf });
  },
});

Deno.bench({
  name: "planPacking(): 528 tensors into chunks",
  fn: () => {
    planPacking({ bytes: sizes, elementSizes }, packCandidates(sizes, options), options, () => 0);
  },
});

const packed = new Uint8Array(256 * 1024);
const views = new Map<unknown, TypedArray>();
function viewOf(cls: { new (b: ArrayBuffer): TypedArray }): TypedArray {
  let view = views.get(cls);
  if (!view) views.set(cls, view = new cls(packed.buffer));
  return view;
}
const [plan] = planPacking(
  { bytes: sizes, elementSizes },
  packCandidates(sizes, options),
  options,
  () => 0,
);
Deno.bench({
  name: "naive: a fresh buffer per tensor (slice)",
  group: "pack",
  baseline: true,
  fn: () => {
    for (const array of arrays) array.slice();
  },
});
Deno.bench({
  name: "pack 528 tensors into one buffer with typed set()",
  group: "pack",
  fn: () => {
    for (let m = 0; m < plan.members.length; m++) {
      const src = arrays[plan.members[m]];
      const view = viewOf(src.constructor as { new (b: ArrayBuffer): TypedArray });
      view.set(src as never, plan.offsets[m] / (src as Float32Array).BYTES_PER_ELEMENT);
    }
  },
});

Deno.bench({
  name: "naive: Tensor.from() per leaf",
  group: "startCopy cpu",
  baseline: true,
  fn: () => {
    for (const array of arrays) Tensor.from(array);
  },
});
Deno.bench({
  name: "startCopy(batch, 'cpu') + get()",
  group: "startCopy cpu",
  fn: async () => {
    await startCopy(batch, "cpu").get();
  },
});
