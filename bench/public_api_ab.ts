/**
 * The public API's copy cases, timed with nothing but `mod.ts`, so that the
 * same script measures two versions of the library (two checkouts) in one
 * lease: run it in each, alternately, and compare the medians.
 *
 * Run: `deno run --allow-ffi --allow-read --allow-env bench/public_api_ab.ts [label]`
 * (needs a GPU; `MTC_AB_ITERATIONS`, default 500). Prints one JSON line.
 *
 * @module
 */

import { deviceCount, disposeAll, hostArena, startCopy } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device: nothing to measure.");
  Deno.exit(0);
}
const iterations = Number(Deno.env.get("MTC_AB_ITERATIONS") ?? 500);

async function median(body: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 50; i++) disposeAll(await body());
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    const result = await body();
    samples.push((performance.now() - start) * 1000);
    disposeAll(result);
  }
  samples.sort((a, b) => a - b);
  return Math.round(samples[samples.length >> 1] * 10) / 10;
}

const ref16 = createBatchMetaData(16);
const ref64 = createBatchMetaData(64, 2);
const small4k = Array.from({ length: 1000 }, (_, i) => new Float32Array(1024).fill(i));
const onDevice = await startCopy(ref16, "cuda:0").get();
const arena = hostArena(1 << 20);
const inArena = createBatchMetaData(16, 1, arena);
const medians = {
  "ref batch 16 H2D": await median(() => startCopy(ref16, "cuda:0").get()),
  "ref batch 64 H2D": await median(() => startCopy(ref64, "cuda:0").get()),
  "1000 x 4 KB H2D": await median(() => startCopy(small4k, "cuda:0").get()),
  "ref batch 16 D2H": await median(() => startCopy(onDevice, "cpu").get()),
  // Last: while an arena exists, every copy looks its CPU leaves up.
  "ref batch 16 H2D from a hostArena": await median(() => startCopy(inArena, "cuda:0").get()),
};
disposeAll(onDevice);
arena.dispose();
console.log(JSON.stringify({ label: Deno.args[0] ?? "", medians }));
