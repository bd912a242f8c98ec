/**
 * Old and new code in one process, alternated copy by copy, for the cases
 * `bench/ab_same_process.ts` leaves out: 32 pageable tensors of 8 MB to
 * the GPU (staged by the native threads, then DMA), and the reference batch
 * both ways at once (a copy to `cuda:0` started while its copy back is in
 * flight). Prints each case's medians and their ratio (new ÷ old).
 *
 * Run, from the new checkout:
 * `deno run --allow-ffi --allow-read --allow-env bench/ab_large.ts <old checkout> [rounds=15]`
 * (`MTC_AB_NEW_FIRST=1` loads the new library first: on some hosts the
 * library loaded second reads slower, so run both orders). The 32 × 8 MB
 * case copies `rounds` times per side, the other 100 × `rounds`.
 *
 * @module
 */

import { abArgs, exitWithoutGpu } from "./_ab_args.ts";

const { oldRoot, iterations: rounds } = abArgs(15);
const newRoot = new URL("../", import.meta.url);

type Library = typeof import("../mod.ts");
interface Side {
  lib: Library;
  pageable: Float32Array[];
  ref16: unknown;
  onGpu: unknown;
}

async function side(root: URL): Promise<Side> {
  const lib: Library = await import(new URL("mod.ts", root).href);
  exitWithoutGpu(lib);
  const examples = await import(new URL("examples/reference_batch.ts", root).href);
  const ref16 = examples.createBatchMetaData(16);
  return {
    lib,
    pageable: Array.from({ length: 32 }, (_, i) => new Float32Array(2 << 20).fill(i)),
    ref16,
    onGpu: await lib.startCopy(ref16, "cuda:0").get(),
  };
}

const newFirst = Deno.env.get("MTC_AB_NEW_FIRST") === "1";
const first = await side(newFirst ? newRoot : oldRoot);
const second = await side(newFirst ? oldRoot : newRoot);
const sides = newFirst ? [second, first] : [first, second];

const cases: [string, number, (s: Side) => Promise<unknown[]>][] = [
  [
    "32 x 8 MB pageable H2D",
    rounds,
    async (s) => [await s.lib.startCopy(s.pageable, "cuda:0").get()],
  ],
  ["ref 16 both ways at once", 100 * rounds, async (s) => {
    const there = s.lib.startCopy(s.ref16, "cuda:0");
    const back = s.lib.startCopy(s.onGpu, "cpu");
    return [await there.get(), await back.get()];
  }],
];

const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1];
for (const [name, n, copy] of cases) {
  const times: number[][] = [[], []];
  for (let i = 0; i < n + 3; i++) {
    // Alternate which side goes first; the first three rounds warm up.
    for (const k of i & 1 ? [1, 0] : [0, 1]) {
      const start = performance.now();
      const results = await copy(sides[k]);
      const end = performance.now();
      for (const result of results) sides[k].lib.disposeAll(result);
      if (i >= 3) times[k].push((end - start) * 1000);
    }
  }
  const [old, current] = times.map(median);
  console.log(
    `${name.padEnd(24)} old ${old.toFixed(1)} µs | new ${current.toFixed(1)} µs | new/old ${
      (current / old).toFixed(3)
    } | n=${n}`,
  );
}
