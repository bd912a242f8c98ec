/**
 * Old code against new code for the walk into a route (what `startCopy`
 * does before any memory or CUDA call), in one process, alternating: the
 * CPU-side A/B of `bench/ab_same_process.ts`, for changes to the walk, the
 * compiled plans, the route and the packer. Needs no GPU (the route's
 * outputs stay unbound), so it also runs on the dev machine.
 *
 * Run, from the new checkout:
 * `deno run --allow-read --allow-ffi --allow-env bench/ab_walk.ts <old checkout> [iterations]`
 * Prints one line per case: both medians, their ratio and the median of the
 * pairs' ratios.
 *
 * @module
 */

import { abArgs } from "./_ab_args.ts";

const { oldRoot, iterations } = abArgs(4000);
const newRoot = new URL("../", import.meta.url);

/** One version's walk of each case into a fresh route; returns microseconds. */
async function side(root: URL): Promise<(c: number) => number> {
  // The walk moved to src/walk/ (older checkouts have src/traverse.ts).
  const { walk } = await import(new URL("src/walk/walk.ts", root).href).catch(() =>
    import(new URL("src/traverse.ts", root).href)
  );
  const { Route } = await import(new URL("src/route.ts", root).href);
  const { resolveOptions } = await import(new URL("src/options.ts", root).href);
  const { createBatchMetaData } = await import(new URL("examples/reference_batch.ts", root).href);
  const options = resolveOptions(undefined);
  const cases = [
    createBatchMetaData(16),
    createBatchMetaData(64, 2),
    Array.from({ length: 1000 }, () => new Float32Array(1024)),
  ];
  return (c) => {
    const route = new Route(0, options);
    const start = performance.now();
    walk(cases[c], route);
    const micros = (performance.now() - start) * 1000;
    route.releaseLists();
    return micros;
  };
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1];
const old = await side(oldRoot);
const current = await side(newRoot);
for (const [c, name] of ["ref 16", "ref 64", "1000 arrays"].entries()) {
  for (let i = 0; i < 500; i++) old(c), current(c);
  const olds: number[] = [];
  const news: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < iterations; i++) {
    // Alternate which goes first.
    const [x, y] = i & 1 ? [old(c), current(c)] : [current(c), old(c)].reverse();
    olds.push(x);
    news.push(y);
    ratios.push(y / x);
  }
  console.log(
    `${name.padEnd(12)} old ${median(olds).toFixed(1)} µs | new ${median(news).toFixed(1)} µs | ` +
      `new/old ${(median(news) / median(olds)).toFixed(2)} (pairs ${median(ratios).toFixed(2)})`,
  );
}
