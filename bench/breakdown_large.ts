/**
 * Where the time of a 1000 × 4 KB copy to cuda:0 goes (and of the
 * 16-sample reference batch back to the CPU), phase by phase, each timed
 * in a loop of its own with the library's own pieces; then the real calls.
 * `deno run -A bench/breakdown_large.ts [iterations]`.
 *
 * @module
 */

import { copyAsync, copyPieces, viewAddress } from "../ffi/native.ts";
import { eventStatus } from "../ffi/events.ts";
import { deviceCount, disposeAll, startCopy } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";
import { walk } from "../src/walk/walk.ts";
import { Route } from "../src/route.ts";
import { resolveOptions } from "../src/options.ts";
import { pinnedPool } from "../src/memory/pinned_memory.ts";
import { devicePool } from "../src/memory/device_memory.ts";
import { acquireEvent, releaseEvent } from "../src/memory/event_pool.ts";
import { packingThreads } from "../src/staging/parallel_pack.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device.");
  Deno.exit(0);
}
const ITERATIONS = Number(Deno.args[0] ?? 1000);
const small4k = Array.from({ length: 1000 }, (_, i) => new Float32Array(1024).fill(i));
const BYTES = 1000 * 4096;

/** The median µs of `body` over ITERATIONS runs after 100 (`untimed` runs before each, off the clock). */
function median(body: () => void, untimed?: () => void): number {
  const t: number[] = [];
  for (let i = 0; i < ITERATIONS + 100; i++) {
    untimed?.();
    const s = performance.now();
    body();
    if (i >= 100) t.push((performance.now() - s) * 1000);
  }
  t.sort((a, b) => a - b);
  return t[t.length >> 1];
}
/** The medians of the real calls: `startCopy()` returning, `get()` after that, `disposeAll`. */
async function realCopies(data: unknown, device: string): Promise<number[]> {
  const t: number[][] = [[], [], []];
  for (let i = 0; i < ITERATIONS + 100; i++) {
    const t0 = performance.now();
    const handle = startCopy(data, device);
    const t1 = performance.now();
    const result = await handle.get();
    const t2 = performance.now();
    disposeAll(result);
    if (i >= 100) [t1 - t0, t2 - t1, performance.now() - t2].forEach((x, k) => t[k].push(x * 1000));
  }
  return t.map((s) => s.sort((a, b) => a - b)[s.length >> 1]);
}

const stage = pinnedPool.acquire(BYTES);
const device = devicePool(0).acquire(BYTES);
const event = acquireEvent(0);
const opts = resolveOptions(undefined);
const threads = packingThreads(BYTES, 1000);
const table = new Float64Array(3000);
const rows: [string, number][] = [];
rows.push([
  "walk + route (1000 leaves)",
  median(() => {
    const route = new Route(0, opts);
    walk(small4k, route);
    route.releaseLists();
  }),
]);
rows.push([
  "address table (viewAddress x 1000)",
  median(() => {
    for (let m = 0; m < 1000; m++) {
      table[3 * m] = viewAddress(small4k[m]);
      table[3 * m + 1] = stage.address + 4096 * m;
      table[3 * m + 2] = 4096;
    }
  }),
]);
rows.push([`copyPieces 4 MB, ${threads} threads`, median(() => copyPieces(table, 1000, threads))]);

const pack = () => copyPieces(table, 1000, threads);
/** The stage's 4 MB DMA, polled to its end. */
const dmaOfStage = () => {
  copyAsync({ device: 0, dst: device.address, src: stage.address, bytes: BYTES, event });
  while (eventStatus(0, event) === -1) { /* poll */ }
};
for (const idle of [100, 300]) {
  rows.push([
    `copyPieces 4 MB after ${idle} µs idle`,
    median(pack, () => {
      const until = performance.now() + idle / 1000;
      while (performance.now() < until) { /* idle: the helpers go to sleep */ }
    }),
  ]);
}
rows.push(["one DMA of 4 MB + poll (floor)", median(dmaOfStage)]);
rows.push([
  "copyPieces after a DMA of the stage and a walk",
  median(pack, () => {
    dmaOfStage(); // as the copy before left it
    const route = new Route(0, opts);
    walk(small4k, route);
    route.releaseLists();
  }),
]);
rows.push([
  "pack + DMA + poll",
  median(() => {
    pack();
    dmaOfStage();
  }),
]);
const [ret, got, disp] = await realCopies(small4k, "cuda:0");
rows.push(["startCopy() returns", ret], ["get() resolves after that", got], ["disposeAll", disp]);
releaseEvent(0, event);
pinnedPool.release(stage);
devicePool(0).release(device);

const ref16 = createBatchMetaData(16);
const onDevice = await startCopy(ref16, "cuda:0").get();
rows.push([
  "D2H ref16: walk + route",
  median(() => {
    const route = new Route(-1, opts);
    walk(onDevice, route);
    route.releaseLists();
  }),
]);
const [r2, g2, d2] = await realCopies(onDevice, "cpu");
rows.push(["D2H ref16: startCopy() returns", r2], ["D2H ref16: get() after", g2], [
  "D2H ref16: disposeAll",
  d2,
]);
for (const [name, us] of rows) console.log(`${name.padEnd(40)} ${us.toFixed(1)} µs`);
