/**
 * The reference example: copy a batch of per-sample meta-data (16 samples ×
 * 33 small tensors) to the GPU with one call, overlap other work with the
 * transfer, then consume the GPU-resident result. Then the same batch built
 * straight into pinned memory (a host arena), which is sent without packing.
 *
 * Run: `deno task example`
 *
 * @module
 */

import { cudaStatus, deviceCount, disposeAll, hostArena, startCopy } from "../mod.ts";
import { createBatchMetaData } from "./reference_batch.ts";

const device = deviceCount() > 0 ? "cuda:0" : "cpu";
if (device === "cpu") {
  console.log(`notice: ${cudaStatus().message}; running the example on "cpu" instead of "cuda:0"`);
}

// 1. Build the batch meta-data (in training, it comes from the data loader).
const batch = createBatchMetaData(16);

// 2. Start the asynchronous copy: small tensors are packed into pinned
//    chunks and sent with one DMA per chunk. Inputs must not be modified
//    until the copy has completed.
const handle = startCopy(batch, device);

// 3. Overlap other work with the transfer (here: stand-in CPU work, timed).
const overlapStart = performance.now();
let work = 0;
for (let i = 0; i < 100_000; i++) work += Math.sqrt(i);
const overlapMs = performance.now() - overlapStart;
if (!(work > 0)) throw new Error("the stand-in work did not run");

// 4. Retrieve and consume the result.
const onDevice = await handle.get();
console.log(
  `batch meta-data ready on ${device}, after ${overlapMs.toFixed(2)} ms of other work meanwhile:`,
);
for (const [index, sample] of onDevice.entries()) {
  console.log(
    `sample ${index}: ${sample.cams_gt.length} cameras, ` +
      `${sample.gt_data.class_ids.numel} GT objects, on ${sample.gt_data.bounding_boxes_3d.device}`,
  );
}
const stats = handle.stats();
console.log(
  device === "cpu"
    // CPU to CPU moves nothing: the result wraps the input arrays.
    ? `${stats.tensors} tensors (${stats.bytes} bytes) wrapped on the CPU without copying`
    : `${stats.tensors} tensors (${stats.bytes} bytes), ${stats.packedTensors} packed into ` +
      `${stats.chunks} chunk(s), ${stats.copies} transfer(s)`,
);
disposeAll(onDevice);

// 5. Build the next batch straight into pinned memory: startCopy sends the
//    arena's tensors from where they lie (one DMA, no packing copy). Reuse
//    the arena with reset() once the copy has completed.
using arena = hostArena(1 << 20);
const pinnedBatch = createBatchMetaData(16, 2, arena);
const fromArena = startCopy(pinnedBatch, device);
const arenaResult = await fromArena.get();
const arenaStats = fromArena.stats();
console.log(
  `from a host arena (${arena.usedBytes} of ${arena.byteLength} bytes used, ` +
    `${arena.pinned ? "pinned" : "ordinary memory: no GPU"}): ${arenaStats.tensors} tensors, ` +
    `${arenaStats.copies} transfer(s)`,
);
disposeAll(arenaResult);
arena.reset();
