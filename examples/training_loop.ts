/**
 * A small, real training loop on the package's exports only: batches of
 * meta-data come from an async source (the data loader), `prefetch` keeps
 * the next two copies in flight, and each step reduces every sample's boxes
 * on the device with a kernel shipped as PTX (`examples/step_kernels.ptx`,
 * JIT-compiled by the driver: no toolkit), runs a stand-in for the forward
 * and backward pass (a kernel that keeps the GPU busy), and copies the sums
 * back ordered after them on the GPU: one await per step. It prints per-step
 * timings and how long the loop waited for data, and checks every step's
 * sums against the CPU.
 *
 * Run: `deno task example:loop`. Without a GPU it runs on the CPU, with a
 * notice.
 *
 * @module
 */

import {
  type CopyResult,
  cudaStatus,
  deviceCount,
  type Kernel,
  loadModule,
  prefetch,
  startCopy,
} from "../mod.ts";
import { createBatchMetaData, type SampleMetaData } from "./reference_batch.ts";
import { STEP_KERNELS_PTX } from "./step_kernels_ptx.ts";

const STEPS = 12;
const SAMPLES = 16;
/** Simulated forward and backward pass on the GPU, per step. */
const STEP_COMPUTE_US = 3000;

const device = deviceCount() > 0 ? "cuda:0" : "cpu";
if (device === "cpu") {
  console.log(`notice: ${cudaStatus().message}; running the loop on "cpu" instead of "cuda:0"`);
}

let kernels: { sum: Kernel; spin: Kernel } | undefined;
if (device !== "cpu") {
  // The PTX as a module: a remote import caches it with the code.
  const module = await loadModule(STEP_KERNELS_PTX, { device });
  kernels = {
    sum: module.kernel("sum_f32", ["ptr", "u32", "ptr", "u32"]),
    spin: module.kernel("spin_ns", ["u64"]),
  };
}

interface Batch {
  samples: SampleMetaData[];
  /** One float per sample, zeroed: the device-side reduction adds into it. */
  sums: Float32Array;
}

/**
 * The data loader: builds each batch (in a real loop, reads and decodes it).
 * Its await lets the loop body run first: the batch is then built while the
 * loop body waits for the GPU, not while the loop waits for data.
 */
async function* loader(): AsyncGenerator<Batch> {
  for (let step = 0; step < STEPS; step++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    yield { samples: createBatchMetaData(SAMPLES, step + 1), sums: new Float32Array(SAMPLES) };
  }
}

function cpuSums(samples: SampleMetaData[]): number[] {
  return samples.map((s) =>
    (s.gt_data.bounding_boxes_3d.toTypedArray() as Float32Array).reduce((a, b) => a + b, 0)
  );
}

/** One step on the device: the sums of each sample's boxes, read back with one await. */
async function consume(batch: CopyResult<Batch>): Promise<Float32Array> {
  if (kernels) {
    let work;
    for (const [index, sample] of batch.samples.entries()) {
      const boxes = sample.gt_data.bounding_boxes_3d;
      work = kernels.sum.launch({
        grid: 1,
        block: 256,
        args: [boxes, boxes.numel, batch.sums, index],
      });
    }
    work = kernels.spin.launch({ grid: 1, block: 1, args: [BigInt(STEP_COMPUTE_US * 1000)] });
    // Ordered after the kernels on the GPU: the one await of the step.
    const [back] = await startCopy([batch.sums], "cpu", { after: work }).get();
    const sums = (back.toTypedArray() as Float32Array).slice();
    back.dispose();
    return sums;
  }
  const boxes = await startCopy(batch.samples.map((s) => s.gt_data.bounding_boxes_3d), "cpu").get();
  return Float32Array.from(
    boxes,
    (t) => (t.toTypedArray() as Float32Array).reduce((a, b) => a + b, 0),
  );
}

const reference = Array.from(
  { length: STEPS },
  (_, step) => cpuSums(createBatchMetaData(SAMPLES, step + 1)),
);
const batches = prefetch(loader(), device, { depth: 2, disposePrevious: true });
// Step 0 also waits for the first batches and for CUDA to start; the steady
// state is what prefetch is for.
let steadyWaited = 0;
let steadyStart = 0;
// On the CPU the loader has no device work to overlap, so that time is its own.
const waitLabel = device === "cpu" ? "loader" : "waited for data";
const loopStart = performance.now();
for (let step = 0;; step++) {
  if (step === 1) steadyStart = performance.now();
  const waitStart = performance.now();
  const next = await batches.next();
  const wait = performance.now() - waitStart;
  if (next.done) break;
  if (step > 0) steadyWaited += wait;
  const stepStart = performance.now();
  const sums = await consume(next.value);
  const stepMs = performance.now() - stepStart;
  const worst = Math.max(
    ...sums.map((sum, i) =>
      Math.abs(sum - reference[step][i]) / Math.max(1, Math.abs(reference[step][i]))
    ),
  );
  if (worst > 1e-4) {
    throw new Error(`step ${step}: the device's sums differ from the CPU's by ${worst}`);
  }
  console.log(
    `step ${String(step).padStart(2)}: ${waitLabel} ${wait.toFixed(3)} ms, step ${
      stepMs.toFixed(3)
    } ms, sum of sample 0's boxes ${sums[0].toFixed(3)} (matches the CPU)`,
  );
}
const end = performance.now();
const steady = end - steadyStart;
const share = `${steadyWaited.toFixed(2)} ms (${(100 * steadyWaited / steady).toFixed(1)}%)`;
console.log(
  `${STEPS} steps on ${device}${kernels ? " (reduction on the device, PTX kernel)" : ""} in ${
    (end - loopStart).toFixed(1)
  } ms; steps 1-${STEPS - 1}: ${steady.toFixed(1)} ms, of which ${
    device === "cpu"
      // No device work to hide the loader behind: each batch is built while the loop waits.
      ? `${share} building batches in the loader (on the CPU nothing runs beside it; on a GPU this overlaps the device's work)`
      : `${share} waiting for data`
  }`,
);
