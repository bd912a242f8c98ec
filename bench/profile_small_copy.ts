/**
 * Runs many small copies (the 16-sample reference batch to cuda:0) so that
 * `deno run --cpu-prof bench/profile_small_copy.ts` shows where the time
 * goes. Prints the median time per copy. `MTC_DIRECTION=d2h`: copies of
 * the batch's copy on cuda:0 back to the CPU instead.
 *
 * @module
 */

import { deviceCount, disposeAll, startCopy } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device: nothing to profile.");
  Deno.exit(0);
}
const batch = createBatchMetaData(Number(Deno.env.get("MTC_SAMPLES") ?? 16));
const back = Deno.env.get("MTC_DIRECTION") === "d2h";
const input = back ? await startCopy(batch, "cuda:0").get() : batch;
const target = back ? "cpu" : "cuda:0";
const samples: number[] = [];
for (let i = 0; i < 5000; i++) {
  const start = performance.now();
  const result = await startCopy(input, target).get();
  samples.push((performance.now() - start) * 1000);
  disposeAll(result);
}
samples.sort((a, b) => a - b);
console.log(
  `${target}: median ${samples[samples.length >> 1].toFixed(1)} µs over ${samples.length} copies`,
);
