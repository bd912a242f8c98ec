/**
 * Two GPUs: 32 × 8 MB pageable to `cuda:0` alone, to `cuda:1` alone, and to
 * both at once (two copies started together); the same from pinned host
 * arenas (DMA only, no staging), which tells the host's staging bandwidth
 * from the links'; then the reference batch's latency to each device alone,
 * alternating between them, and to one while the other receives a large copy.
 * Prints medians and the throughput of the pair against one device.
 *
 * Run: `deno run --allow-ffi --allow-read --allow-env bench/two_gpus.ts`
 * (needs two GPUs; `nvidia-h200-x2` on the device tool).
 *
 * @module
 */

import { deviceCount, disposeAll, hostArena, startCopy } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";

if (deviceCount() < 2) {
  console.log(`${deviceCount()} CUDA device(s): this benchmark needs two.`);
  Deno.exit(0);
}

const MB = 1e6;
const large = (seed: number) =>
  Array.from({ length: 32 }, (_, i) => new Float32Array(2 * 1024 * 1024).fill(seed + i));
const inputs = [large(0), large(100)];
const bytes = 32 * 8 * 1024 * 1024;

async function median(rounds: number, body: () => Promise<unknown[]>): Promise<number> {
  for (let i = 0; i < 3; i++) disposeAll(await body());
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    const results = await body();
    samples.push(performance.now() - start);
    disposeAll(results);
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1];
}

async function pair(label: string, data: unknown[][]): Promise<void> {
  const one0 = await median(20, async () => [await startCopy(data[0], "cuda:0").get()]);
  const one1 = await median(20, async () => [await startCopy(data[1], "cuda:1").get()]);
  const both = await median(
    20,
    () => Promise.all([startCopy(data[0], "cuda:0").get(), startCopy(data[1], "cuda:1").get()]),
  );
  const single = Math.min(one0, one1);
  const rate = (ms: number, n = 1) => `${(n * bytes / ms / MB).toFixed(1)} GB/s`;
  console.log(`${label} to cuda:0 alone: ${one0.toFixed(2)} ms (${rate(one0)})`);
  console.log(`${label} to cuda:1 alone: ${one1.toFixed(2)} ms (${rate(one1)})`);
  console.log(
    `${label} to both at once: ${both.toFixed(2)} ms (${rate(both, 2)}), ` +
      `${((2 * single) / both).toFixed(2)}x the throughput of the faster device alone`,
  );
}

await pair("32 x 8 MB pageable", inputs);
const arenas = [hostArena(bytes + 4096), hostArena(bytes + 4096)];
const pinned = arenas.map((arena, k) =>
  inputs[k].map((array) => {
    const view = arena.float32(array.length);
    view.set(array);
    return view;
  })
);
await pair("32 x 8 MB from pinned arenas", pinned);
arenas.forEach((arena) => arena.dispose());

// The reference batch's latency, each mode interleaved with the others
// copy by copy (this host's speed drifts within minutes): to one device
// again and again, alternating between the two, and to cuda:0 while
// cuda:1 receives 32 × 8 MB from a pinned arena.
const ref16 = createBatchMetaData(16);
const busyArena = hostArena(bytes + 4096);
const busyInput = inputs[1].map((array) => busyArena.float32(array.length).fill(array[0]));
const latency = async (device: string) => {
  const start = performance.now();
  const result = await startCopy(ref16, device).get();
  const us = 1000 * (performance.now() - start);
  disposeAll(result);
  return us;
};
const modes: Record<string, number[]> = {
  "to cuda:0, one device in turn": [],
  "to cuda:1, one device in turn": [],
  "to cuda:0 and cuda:1 alternating": [],
  "to cuda:0 while cuda:1 receives 32 x 8 MB": [],
};
const [toZero, toOne, alternating, whileBusy] = Object.values(modes);
for (let round = 0; round < 220; round++) {
  const keep = round >= 20;
  for (let i = 0; i < 5; i++) {
    const us = await latency("cuda:0");
    if (keep) toZero.push(us);
  }
  for (let i = 0; i < 5; i++) {
    const us = await latency("cuda:1");
    if (keep) toOne.push(us);
  }
  for (let i = 0; i < 6; i++) {
    const us = await latency(i % 2 ? "cuda:1" : "cuda:0");
    if (keep) alternating.push(us);
  }
  const busy = startCopy(busyInput, "cuda:1");
  for (let i = 0; i < 5; i++) {
    const us = await latency("cuda:0");
    if (keep) whileBusy.push(us);
  }
  disposeAll(await busy.get());
}
busyArena.dispose();
const middle = (samples: number[]) => [...samples].sort((a, b) => a - b)[samples.length >> 1];
const base = middle(toZero);
for (const [mode, samples] of Object.entries(modes)) {
  const us = middle(samples);
  console.log(
    `reference batch (16 samples) ${mode}: ${us.toFixed(1)} µs (median), ` +
      `${(us / base).toFixed(2)}x the first`,
  );
}
