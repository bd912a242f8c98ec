/**
 * Old code against new code in one process: both versions of the library
 * are loaded side by side (each with its own shim, pools and streams) and
 * their copies alternate, copy by copy, so that both see the same machine.
 * The GPU hosts' JavaScript speed changes by up to 2× from minute to
 * minute, which swamps differences between separate runs; the ratio of
 * neighbouring copies does not.
 *
 * Run, from the new checkout:
 * `deno run --allow-ffi --allow-read --allow-env bench/ab_same_process.ts <old checkout> [iterations]`
 * (needs a GPU; the old checkout is any directory holding `mod.ts` and
 * `examples/reference_batch.ts` of a version with `hostArena`). Prints one
 * line per case: both medians, their ratio and the median of the pairs'
 * ratios.
 *
 * @module
 */

import { deviceCount } from "../mod.ts";

type Library = typeof import("../mod.ts");
type Examples = typeof import("../examples/reference_batch.ts");

if (deviceCount() === 0 || Deno.args.length === 0) {
  console.log("Needs a CUDA device and the old checkout's directory as the first argument.");
  Deno.exit(0);
}
const oldRoot = new URL(`${Deno.args[0].replace(/\/$/, "")}/`, `file://${Deno.cwd()}/`);
const iterations = Number(Deno.args[1] ?? 2000);

/** One version's library, its inputs (built with its own `Tensor`) and its results to copy back. */
interface Side {
  lib: Library;
  inputs: unknown[];
}

async function side(lib: Library, examples: Examples): Promise<Side> {
  const ref16 = examples.createBatchMetaData(16);
  const arena = lib.hostArena(1 << 20);
  return {
    lib,
    inputs: [
      ref16,
      examples.createBatchMetaData(64, 2),
      Array.from({ length: 1000 }, (_, i) => new Float32Array(1024).fill(i)),
      await lib.startCopy(ref16, "cuda:0").get(),
      examples.createBatchMetaData(16, 1, arena),
    ],
  };
}

const CASES = ["ref 16 H2D", "ref 64 H2D", "1000 x 4 KB H2D", "ref 16 D2H", "ref 16 from an arena"];

async function copyOnce({ lib, inputs }: Side, c: number): Promise<number> {
  const start = performance.now();
  const result = await lib.startCopy(inputs[c], c === 3 ? "cpu" : "cuda:0").get();
  const micros = (performance.now() - start) * 1000;
  lib.disposeAll(result);
  return micros;
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1];

const old = await side(
  await import(new URL("mod.ts", oldRoot).href),
  await import(new URL("examples/reference_batch.ts", oldRoot).href),
);
const current = await side(
  await import("../mod.ts"),
  await import("../examples/reference_batch.ts"),
);
for (let c = 0; c < CASES.length; c++) {
  const n = c === 1 || c === 2 ? iterations / 4 : iterations;
  for (let i = 0; i < 50; i++) await copyOnce(old, c), await copyOnce(current, c);
  const olds: number[] = [];
  const news: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < n; i++) {
    // Alternate which goes first.
    const [x, y] = i & 1
      ? [await copyOnce(old, c), await copyOnce(current, c)]
      : [await copyOnce(current, c), await copyOnce(old, c)].reverse();
    olds.push(x);
    news.push(y);
    ratios.push(y / x);
  }
  console.log(
    `${CASES[c].padEnd(21)} old ${median(olds).toFixed(1).padStart(7)} µs | new ${
      median(news).toFixed(1).padStart(7)
    } µs | new/old ${(median(news) / median(olds)).toFixed(2)} (pairs ${
      median(ratios).toFixed(2)
    }) | n=${n}`,
  );
}
