/**
 * The per-tensor cost of the reference batch (16 samples) to `cuda:0`
 * against an older version (the starting code, f3151d6, had no
 * `hostArena`): the old code from ordinary arrays, this code from ordinary
 * arrays and from a batch built in a host arena, and the floor (this code
 * copying one arena view of the batch's bytes: one DMA). All four load into
 * one process and alternate copy by copy (see `ab_same_process.ts` for
 * why). Prints each median, less the floor, as a multiple of the old one.
 *
 * Run, from the new checkout:
 * `deno run --allow-ffi --allow-read --allow-env bench/ab_arena_origin.ts <old checkout> [rounds]`
 * (needs a GPU; the old checkout is any directory holding `mod.ts` and
 * `examples/reference_batch.ts`).
 *
 * @module
 */

import { abArgs, exitWithoutGpu } from "./_ab_args.ts";

type Library = typeof import("../mod.ts");
type Examples = typeof import("../examples/reference_batch.ts");

const { oldRoot, iterations: rounds } = abArgs(4000);
// (The old library is loaded first.)
const old: Library = await import(new URL("mod.ts", oldRoot).href);
exitWithoutGpu(old);
const oldExamples: Examples = await import(new URL("examples/reference_batch.ts", oldRoot).href);
const lib: Library = await import("../mod.ts");
const examples: Examples = await import("../examples/reference_batch.ts");

const arena = lib.hostArena(1 << 20);
const ordinary = examples.createBatchMetaData(16);
const bytes = lib.startCopy(ordinary, "cpu").stats().bytes;
const floorArena = lib.hostArena(bytes + 64);
const cases: [string, Library, unknown][] = [
  ["old, ordinary arrays", old, oldExamples.createBatchMetaData(16)],
  ["new, ordinary arrays", lib, ordinary],
  ["new, host arena", lib, examples.createBatchMetaData(16, 1, arena)],
  ["floor (one DMA)", lib, [floorArena.uint8(bytes)]],
];
const samples: number[][] = cases.map(() => []);
for (let i = 0; i < rounds; i++) {
  for (let k = 0; k < cases.length; k++) {
    // Each round starts at another case, so that none always follows the same one.
    const c = (k + i) % cases.length;
    const [, library, data] = cases[c];
    const start = performance.now();
    const result = await library.startCopy(data, "cuda:0").get();
    const us = (performance.now() - start) * 1000;
    library.disposeAll(result);
    if (i >= rounds / 8) samples[c].push(us);
  }
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const floor = median(samples[3]);
const oldCost = median(samples[0]) - floor;
for (let c = 0; c < cases.length; c++) {
  const us = median(samples[c]);
  console.log(
    `${cases[c][0].padEnd(22)} ${us.toFixed(1)} µs, less the floor ${
      (us - floor).toFixed(1)
    } µs, ` +
      `${((us - floor) / oldCost).toFixed(2)}x the old per-tensor cost`,
  );
}
arena.dispose();
floorArena.dispose();
