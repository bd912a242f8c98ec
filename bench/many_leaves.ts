/**
 * Copies of 100,000 tiny tensors (`Float32Array(2)` each) to cuda:0, whole
 * (`startCopy` + `get()` + `disposeAll`), with the time and the number of
 * leaves per copy. Such a copy is bound by V8's young-generation collector
 * (every output is an object of its own, alive until the copy ends), so
 * compare it with and without a larger young generation:
 * `deno run -A bench/many_leaves.ts [copies]` and
 * `deno run -A --v8-flags=--max-semi-space-size=64 bench/many_leaves.ts`.
 *
 * @module
 */

import { deviceCount, disposeAll, startCopy } from "../mod.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device: the copies need one.");
  Deno.exit(0);
}
const copies = Number(Deno.args[0] ?? 60);
const tiny = Array.from({ length: 100_000 }, (_, i) => new Float32Array([i, -i]));
for (let i = 0; i < 5; i++) disposeAll(await startCopy(tiny, "cuda:0").get());
const samples: number[] = [];
for (let i = 0; i < copies; i++) {
  const start = performance.now();
  disposeAll(await startCopy(tiny, "cuda:0").get());
  samples.push((performance.now() - start) * 1000);
}
const mean = samples.reduce((sum, us) => sum + us, 0) / samples.length;
samples.sort((a, b) => a - b);
const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
const perLeaf = (us: number) => `${(us / 100).toFixed(0)} ns`;
console.log(
  `100,000 tiny tensors, ${copies} copies: median ${perLeaf(at(0.5))} a leaf, mean ${
    perLeaf(mean)
  }, p10 ${perLeaf(at(0.1))}, p90 ${perLeaf(at(0.9))}`,
);
