/**
 * Linear scaling: the 64-sample reference batch against the 16-sample one,
 * copied to `cuda:0` alternately, copy by copy, so that both see the same
 * machine state (the GPU hosts' speed drifts by up to 2× between runs).
 * Issue 10's target: 64 samples cost at most 4.2× 16 samples.
 *
 * Run: `deno run --allow-ffi --allow-read --allow-env bench/scaling.ts [pairs]`
 * (needs a GPU). Prints both medians, their ratio and the median of the
 * pairs' ratios.
 *
 * @module
 */

import { deviceCount, disposeAll, startCopy } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device: nothing to measure.");
  Deno.exit(0);
}
const pairs = Number(Deno.args[0] ?? 1500);
const small = createBatchMetaData(16);
const large = createBatchMetaData(64, 2);

async function copyOnce(batch: unknown): Promise<number> {
  const start = performance.now();
  disposeAll(await startCopy(batch, "cuda:0").get());
  return (performance.now() - start) * 1000;
}

for (let i = 0; i < 100; i++) await copyOnce(small), await copyOnce(large);
const smalls: number[] = [];
const larges: number[] = [];
const ratios: number[] = [];
for (let i = 0; i < pairs; i++) {
  // Alternate which goes first.
  const [s, l] = i & 1
    ? [await copyOnce(small), await copyOnce(large)]
    : [await copyOnce(large), await copyOnce(small)].reverse();
  smalls.push(s);
  larges.push(l);
  ratios.push(l / s);
}
const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1];
console.log(
  `16 samples ${median(smalls).toFixed(1)} µs | 64 samples ${median(larges).toFixed(1)} µs | ` +
    `ratio ${(median(larges) / median(smalls)).toFixed(2)} (pairs ${median(ratios).toFixed(2)})`,
);
