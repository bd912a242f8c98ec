/**
 * GPU work from Deno, measured on one machine in one run:
 *
 * - launch overhead: median µs per launch of the example PTX's `noop`
 *   kernel (rounds of back-to-back launches, then one wait), against CuPy's
 *   `RawModule`/`RawKernel` launching the same PTX (bench/cupy_launch.py);
 * - a training step (copy 800 KB in → a reduction kernel → copy the sum
 *   out): one await per step (ordering on the GPU) against awaiting each
 *   stage, and against PyTorch doing the same step (`.to()`, `.sum()`,
 *   `.cpu()`; bench/torch_step.py).
 *
 * Run: `deno run -A bench/gpu_work_bench.ts` (python3 with CuPy and PyTorch
 * for the comparisons; they are skipped where missing).
 *
 * @module
 */

import { deviceCount, disposeAll, type GpuWork, loadModule, startCopy } from "../mod.ts";

if (deviceCount() === 0) {
  console.log("no GPU: nothing to measure");
  Deno.exit(0);
}
const ptxUrl = new URL("../examples/step_kernels.ptx", import.meta.url);
const module = await loadModule(await Deno.readTextFile(ptxUrl));
const noop = module.kernel("noop", []);
const sum = module.kernel("sum_f32", ["ptr", "u32", "ptr", "u32"]);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// Launch overhead.
const LAUNCHES = 1000;
const perLaunch: number[] = [];
for (let round = 0; round < 60; round++) {
  let last: GpuWork | undefined;
  const start = performance.now();
  for (let i = 0; i < LAUNCHES; i++) last = noop.launch({ grid: 1, block: 1, args: [] });
  const elapsed = performance.now() - start;
  await last!.done();
  if (round >= 10) perLaunch.push(elapsed * 1000 / LAUNCHES);
}
console.log(
  `deno launch: ${median(perLaunch).toFixed(2)} µs per launch (median of 50 rounds of ${LAUNCHES})`,
);

// The training step.
const N = 200_000;
const data = Float32Array.from({ length: N }, (_, i) => (i % 13) - 6);
const expected = data.reduce((a, b) => a + b, 0);

async function oneAwait(): Promise<number> {
  const handle = startCopy([data, new Float32Array(1)], "cuda:0");
  const [x, total] = handle.outputs();
  const work = sum.launch({ grid: 132, block: 256, args: [x, N, total, 0], after: handle });
  const [back] = await startCopy([total], "cpu", { after: work }).get();
  const value = back.toTypedArray()[0] as number;
  disposeAll([x, total, back]);
  return value;
}

async function awaitEach(): Promise<number> {
  const [x, total] = await startCopy([data, new Float32Array(1)], "cuda:0").get();
  const work = sum.launch({ grid: 132, block: 256, args: [x, N, total, 0] });
  await work.done();
  const [back] = await startCopy([total], "cpu").get();
  const value = back.toTypedArray()[0] as number;
  disposeAll([x, total, back]);
  return value;
}

const times: Record<string, number[]> = { oneAwait: [], awaitEach: [] };
for (let round = 0; round < 600; round++) {
  for (const [name, step] of [["oneAwait", oneAwait], ["awaitEach", awaitEach]] as const) {
    const start = performance.now();
    const value = await step();
    const elapsed = (performance.now() - start) * 1000;
    if (Math.abs(value - expected) > 1e-3 * Math.max(1, Math.abs(expected))) {
      throw new Error(`${name}: sum ${value}, expected ${expected}`);
    }
    if (round >= 100) times[name].push(elapsed);
  }
}
const one = median(times.oneAwait);
const each = median(times.awaitEach);
console.log(`deno step, one await: ${one.toFixed(1)} µs (median of 500, interleaved)`);
console.log(
  `deno step, await each stage: ${each.toFixed(1)} µs (${(each / one).toFixed(2)}x one await)`,
);
module.dispose();

async function python(script: string, args: string[]): Promise<void> {
  try {
    const output = await new Deno.Command("python3", {
      args: [new URL(script, import.meta.url).pathname, ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(output.code === 0 ? output.stdout : output.stderr);
    console.log(text.trim().split("\n").slice(-3).join("\n"));
  } catch (error) {
    console.log(`${script}: not run (${(error as Error).message})`);
  }
}
await python("./cupy_launch.py", [ptxUrl.pathname, String(LAUNCHES)]);
await python("./torch_step.py", [String(N)]);
