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
 * `examples/reference_batch.ts`; the arena case runs only where both
 * versions have `hostArena`). Prints one line per case: both medians, their
 * ratio and the median of the pairs' ratios, for the copy (`startCopy` to
 * `get()` resolved) and for the copy with `disposeAll(result)` after it
 * (what a training step pays the library). The three `into` cases copy the
 * reference batch into the last result (`startCopy(…, { into })`), from
 * ordinary memory, from a `hostArena`, and from a `hostArena` with the
 * batch's and the result's containers frozen (the frozen path,
 * src/transfer/into/frozen.ts); their result is kept, so their "with
 * disposal" line is the copy alone. `MTC_AB_ONLY=<text>` runs only the
 * cases whose name contains it (`MTC_AB_ONLY=into`: the `into` cases);
 * `MTC_AB_NEW_FIRST=1` loads the new library first (the old one is loaded
 * first otherwise: run both, since the second-loaded one can read slower).
 *
 * @module
 */

import { abArgs, exitWithoutGpu } from "./_ab_args.ts";
import { freezeContainers } from "../examples/freeze_containers.ts";

type Library = typeof import("../mod.ts");
type Examples = typeof import("../examples/reference_batch.ts");

const { oldRoot, iterations } = abArgs(2000);

/** One version's library, its inputs (built with its own `Tensor`) and its results to copy back. */
interface Side {
  lib: Library;
  inputs: unknown[];
  /** The result each case copies into (the `into` cases only). */
  into: (object | undefined)[];
}

async function side(lib: Library, examples: Examples): Promise<Side> {
  const ref16 = examples.createBatchMetaData(16);
  // Versions before hostArena (the start) have no arena case.
  const arena = "hostArena" in lib ? lib.hostArena(1 << 20) : undefined;
  const inArena = arena && examples.createBatchMetaData(16, 1, arena);
  const hasInto = await acceptsInto(lib);
  const intoArena = inArena && hasInto ? await lib.startCopy(inArena, "cuda:0").get() : undefined;
  const intoRef = hasInto ? await lib.startCopy(ref16, "cuda:0").get() : undefined;
  // The same in a batch and a result frozen (what the frozen path skips reading).
  const frozenArena = intoArena && lib.hostArena(1 << 20);
  const inFrozen = frozenArena &&
    freezeContainers(examples.createBatchMetaData(16, 1, frozenArena));
  const intoFrozen = inFrozen && freezeContainers(await lib.startCopy(inFrozen, "cuda:0").get());
  return {
    lib,
    inputs: [
      ref16,
      examples.createBatchMetaData(64, 2),
      Array.from({ length: 1000 }, (_, i) => new Float32Array(1024).fill(i)),
      await lib.startCopy(ref16, "cuda:0").get(),
      inArena,
      intoRef && ref16,
      intoArena && inArena,
      typedArrayLeaves(lib, ref16),
      Array.from({ length: 100_000 }, (_, i) => new Float32Array([i, i + 0.5])),
      inFrozen,
    ],
    into: [
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      intoRef,
      intoArena,
      undefined,
      undefined,
      intoFrozen,
    ],
  };
}

/** Whether `lib` has the `into` option (it came after `hostArena`: older versions refuse it). */
async function acceptsInto(lib: Library): Promise<boolean> {
  try {
    const options = { into: undefined } as never;
    lib.disposeAll(await lib.startCopy([new Float32Array(1)], "cpu", options).get());
    return true;
  } catch (error) {
    if (error instanceof TypeError) return false;
    throw error;
  }
}

const CASES = [
  "ref 16 H2D",
  "ref 64 H2D",
  "1000 x 4 KB H2D",
  "ref 16 D2H",
  "ref 16 from an arena",
  "ref 16 into",
  "ref 16 arena, into",
  "ref 16 TypedArray H2D",
  "100k tiny H2D",
  "ref 16 arena frozen, into",
];

/** Copies fewer times than `iterations` (each a batch several times larger). */
const FEWER: Record<string, number> = { 1: 4, 2: 4, 8: 100 };

/** `batch` with each tensor leaf replaced by a TypedArray of its bytes (the walk's other leaf kind). */
function typedArrayLeaves(lib: Library, batch: unknown): unknown {
  if (batch instanceof lib.Tensor) return batch.toTypedArray();
  if (Array.isArray(batch)) return batch.map((value) => typedArrayLeaves(lib, value));
  if (batch !== null && typeof batch === "object") {
    const entries = Object.entries(batch).map(([k, v]) => [k, typedArrayLeaves(lib, v)]);
    return Object.fromEntries(entries);
  }
  return batch;
}

/** One copy's microseconds: to `get()` resolved, and with the disposal of the result. */
async function copyOnce({ lib, inputs, into }: Side, c: number): Promise<[number, number]> {
  const start = performance.now();
  const options = into[c] === undefined ? undefined : { into: into[c] } as never;
  const result = await lib.startCopy(inputs[c], c === 3 ? "cpu" : "cuda:0", options).get();
  const copied = performance.now();
  if (into[c] === undefined) lib.disposeAll(result);
  return [(copied - start) * 1000, (performance.now() - start) * 1000];
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1];

// Which library is loaded first (on some hosts the second-loaded one reads
// slower: run both orders, MTC_AB_NEW_FIRST=1 for the other).
const loadOld = async () =>
  await side(
    await import(new URL("mod.ts", oldRoot).href),
    await import(new URL("examples/reference_batch.ts", oldRoot).href),
  );
const loadCurrent = async () =>
  await side(await import("../mod.ts"), await import("../examples/reference_batch.ts"));
const newFirst = Deno.env.get("MTC_AB_NEW_FIRST") === "1";
exitWithoutGpu(await import(newFirst ? "../mod.ts" : new URL("mod.ts", oldRoot).href));
const first = await (newFirst ? loadCurrent() : loadOld());
const second = await (newFirst ? loadOld() : loadCurrent());
const [old, current] = newFirst ? [second, first] : [first, second];
const line = (olds: number[], news: number[], ratios: number[]) =>
  `old ${median(olds).toFixed(1).padStart(7)} µs | new ${
    median(news).toFixed(1).padStart(7)
  } µs | new/old ${(median(news) / median(olds)).toFixed(2)} (pairs ${median(ratios).toFixed(2)})`;
const only = Deno.env.get("MTC_AB_ONLY") ?? "";
for (let c = 0; c < CASES.length; c++) {
  if (old.inputs[c] === undefined || current.inputs[c] === undefined) continue;
  if (!CASES[c].includes(only)) continue;
  const n = Math.max(10, Math.floor(iterations / (FEWER[c] ?? 1)));
  for (let i = 0; i < 50; i++) await copyOnce(old, c), await copyOnce(current, c);
  // [copy, copy and disposal] of each side, and their ratios.
  const olds: number[][] = [[], []];
  const news: number[][] = [[], []];
  const ratios: number[][] = [[], []];
  for (let i = 0; i < n; i++) {
    // Alternate which goes first.
    const [x, y] = i & 1
      ? [await copyOnce(old, c), await copyOnce(current, c)]
      : [await copyOnce(current, c), await copyOnce(old, c)].reverse();
    for (const k of [0, 1]) {
      olds[k].push(x[k]);
      news[k].push(y[k]);
      ratios[k].push(y[k] / x[k]);
    }
  }
  console.log(`${CASES[c].padEnd(21)} ${line(olds[0], news[0], ratios[0])} | n=${n}`);
  console.log(`${"  with disposal".padEnd(21)} ${line(olds[1], news[1], ratios[1])}`);
}
