/**
 * Old code against new code for copies to `"cpu"` of CPU inputs (the CPU
 * fallback's whole copy: the walk, a `Tensor` per leaf, the handle), in one
 * process, alternating copy by copy, through the public API: `startCopy` to
 * `get()` resolved. (Not `disposeAll(result)`: before 0.3 it disposed the
 * inputs that came back as the same instances.) Needs no GPU, so it also runs on the
 * dev machine; on a GPU host it measures the same path.
 *
 * Run, from the new checkout:
 * `deno run --allow-read --allow-ffi --allow-env bench/ab_cpu_target.ts <old checkout> [iterations]`
 * Prints one line per case: both medians, their ratio and the median of the
 * pairs' ratios.
 *
 * @module
 */

import { abArgs } from "./_ab_args.ts";

type Library = typeof import("../mod.ts");

const { oldRoot, iterations } = abArgs(4000);
const newRoot = new URL("../", import.meta.url);

/** One version's copy of case `c` to the CPU; microseconds. */
async function side(root: URL): Promise<(c: number) => Promise<number>> {
  const lib: Library = await import(new URL("mod.ts", root).href);
  const { createBatchMetaData } = await import(new URL("examples/reference_batch.ts", root).href);
  const cases = [
    // TypedArray leaves and `Tensor.from` leaves mixed, as a loader makes them.
    createBatchMetaData(16),
    // Only `Tensor` leaves already on the CPU: the path that returns them.
    Array.from({ length: 1000 }, (_, i) => lib.Tensor.from(new Float32Array(16).fill(i))),
  ];
  return async (c) => {
    const start = performance.now();
    await lib.startCopy(cases[c], "cpu").get();
    return (performance.now() - start) * 1000;
  };
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1];
const old = await side(oldRoot);
const current = await side(newRoot);
for (const [c, name] of ["ref 16", "1000 tensors"].entries()) {
  for (let i = 0; i < 500; i++) await old(c), await current(c);
  const olds: number[] = [];
  const news: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < iterations; i++) {
    // Alternate which goes first.
    let x: number, y: number;
    if (i & 1) {
      x = await old(c);
      y = await current(c);
    } else {
      y = await current(c);
      x = await old(c);
    }
    olds.push(x);
    news.push(y);
    ratios.push(y / x);
  }
  console.log(
    `${name.padEnd(12)} old ${median(olds).toFixed(1)} µs | new ${median(news).toFixed(1)} µs | ` +
      `new/old ${(median(news) / median(olds)).toFixed(2)} (pairs ${median(ratios).toFixed(2)})`,
  );
}
