/**
 * A training loop whose small side structures are keyed per step (samples
 * keyed by id): each step copies one fixed batch to "cpu", then two small
 * objects whose keys are new every step (`{ [`img${i}`]: … }`). The walk
 * must neither compile per step nor keep what it compiled: the heap after a
 * forced GC stays flat, and a step costs what a step with fixed keys costs.
 *
 * Prints the heap (after `gc()`) at the start and the end of the per-step-key
 * loop, then the median time of a step with per-step keys and with fixed
 * keys. Pass another checkout's directory to measure its code (e.g. an old
 * commit extracted with `git archive <commit> | tar -x -C /tmp/old`).
 *
 * Run: `deno run --v8-flags=--expose-gc --allow-read --allow-ffi --allow-env
 * bench/per_step_keys.ts [checkout] [steps]` (100,000 steps by default).
 *
 * @module
 */

const root = new URL(
  `${(Deno.args[0] ?? new URL("../", import.meta.url).pathname).replace(/\/$/, "")}/`,
  `file://${Deno.cwd()}/`,
);
const steps = Number(Deno.args[1] ?? 100_000);
const { startCopy } = await import(new URL("mod.ts", root).href);
const { createBatchMetaData } = await import(new URL("examples/reference_batch.ts", root).href);

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("Run with --v8-flags=--expose-gc");
const MiB = 2 ** 20;
/** The heap in use after a full collection, in MiB. */
const heap = () => (gc(), Deno.memoryUsage().heapUsed / MiB);

const batch = createBatchMetaData(16);
const image = new Float32Array(16);
const label = new Int32Array(1);

/** One step: the batch, then two small objects keyed `img${key}` and `label${key}`. */
async function step(key: number): Promise<void> {
  await startCopy(batch, "cpu").get();
  await startCopy({ [`img${key}`]: image, meta: { n: key } }, "cpu").get();
  await startCopy({ [`label${key}`]: label }, "cpu").get();
}

/** Median microseconds of a step over `count` steps whose key is `keyOf(i)`. */
async function timeSteps(count: number, keyOf: (i: number) => number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await step(keyOf(i));
    times.push((performance.now() - start) * 1000);
  }
  return times.sort((a, b) => a - b)[times.length >> 1];
}

// Warm up with fixed keys (the batch's plan and shapes compiled), then the loop.
await timeSteps(1000, () => 0);
const first = heap();
const started = performance.now();
let next = 1;
for (let i = 0; i < steps; i++) await step(next++);
const seconds = (performance.now() - started) / 1000;
const last = heap();
console.log(
  `${root.pathname}: ${steps} steps with per-step keys in ${seconds.toFixed(1)} s; ` +
    `heap after gc() ${first.toFixed(1)} -> ${last.toFixed(1)} MiB`,
);
const perStep = await timeSteps(5000, () => next++);
const fixed = await timeSteps(5000, () => 0);
console.log(
  `median step: per-step keys ${perStep.toFixed(1)} µs, fixed keys ${fixed.toFixed(1)} µs`,
);
