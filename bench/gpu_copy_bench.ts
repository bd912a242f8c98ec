/**
 * `deno bench` on the GPU: `startCopy` against per-tensor copies, one group
 * per case, the per-tensor loop as each group's baseline, so that the
 * summary prints how many times faster `startCopy` is. Without a GPU every
 * bench here is ignored, and the reason is printed once.
 *
 * Run: `deno task bench` (with the CPU benches).
 *
 * To bench your own batch the same way, copy one group: a baseline that
 * moves each tensor on its own, and `startCopy(batch, "cuda:0").get()`.
 *
 * @module
 */

import {
  copyAsync,
  copyFromBuffer,
  deviceAlloc,
  deviceFree,
  hostAlloc,
  hostFree,
} from "../ffi/native.ts";
import { streamSynchronize } from "../ffi/streams.ts";
import { cudaStatus, deviceCount, disposeAll, startCopy, type TypedArray } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";
import { collectLeaves } from "../src/walk/collect_leaves.ts";
import type { Tensor } from "../src/tensor.ts";

const noGpu = deviceCount() === 0;
if (noGpu) {
  // Printed once this file's (empty) table is done, not among the CPU benches' lines.
  globalThis.addEventListener("unload", () => {
    console.log(`every bench of this file was skipped: it needs a GPU (${cudaStatus().message})`);
  });
}

/** The TypedArrays of a batch, in walk order. */
function arraysOf(batch: unknown): TypedArray[] {
  return collectLeaves(batch).map((leaf) =>
    ArrayBuffer.isView(leaf) ? leaf : (leaf as Tensor).toTypedArray()
  );
}

/** The baseline: a device allocation and a synchronous copy per tensor (PyTorch's `.to()` loop). */
function perTensorToDevice(arrays: TypedArray[]): void {
  const addresses = arrays.map((array) => {
    const address = deviceAlloc(0, Math.max(array.byteLength, 1));
    copyFromBuffer({ device: 0, dst: address, src: array });
    return address;
  });
  streamSynchronize(0);
  for (const address of addresses) deviceFree(0, address);
}

function hostToDevice(group: string, batch: unknown): void {
  const arrays = noGpu ? [] : arraysOf(batch);
  Deno.bench({
    name: `per-tensor copies (${arrays.length || "?"} tensors)`,
    group,
    baseline: true,
    ignore: noGpu,
    fn: () => perTensorToDevice(arrays),
  });
  Deno.bench({
    name: 'startCopy(batch, "cuda:0").get()',
    group,
    ignore: noGpu,
    async fn(b) {
      b.start();
      const result = await startCopy(batch, "cuda:0").get();
      b.end();
      disposeAll(result);
    },
  });
}

hostToDevice("reference batch, 16 samples, CPU→GPU", createBatchMetaData(16));
hostToDevice("64 samples, CPU→GPU", createBatchMetaData(64, 2));
hostToDevice(
  "1000 × 4 KB, CPU→GPU",
  Array.from({ length: 1000 }, (_, i) => new Float32Array(1024).fill(i)),
);
hostToDevice(
  "32 × 8 MB pageable, CPU→GPU",
  Array.from({ length: 32 }, (_, i) => new Float32Array(2 * 1024 * 1024).fill(i)),
);

// GPU→CPU: the batch already on the device, read back tensor by tensor or in one copy.
const onDevice = noGpu ? [] : await startCopy(createBatchMetaData(16), "cuda:0").get();
const sources = collectLeaves(onDevice) as Tensor[];
// A synchronous copy per tensor into pinned memory (the faster of the per-tensor ways back).
const landing = noGpu ? 0 : hostAlloc(256 * 1024);
globalThis.addEventListener("unload", () => landing && hostFree(landing));
Deno.bench({
  name: `per-tensor copies (${sources.length || "?"} tensors)`,
  group: "reference batch, 16 samples, GPU→CPU",
  baseline: true,
  ignore: noGpu,
  fn: () => {
    for (const tensor of sources) {
      const address = tensor.ptr === null ? 0 : Number(Deno.UnsafePointer.value(tensor.ptr));
      copyAsync({ device: 0, dst: landing, src: address, bytes: tensor.byteLength });
      streamSynchronize(0);
    }
  },
});
Deno.bench({
  name: 'startCopy(onDevice, "cpu").get()',
  group: "reference batch, 16 samples, GPU→CPU",
  ignore: noGpu,
  async fn(b) {
    b.start();
    const result = await startCopy(onDevice, "cpu").get();
    b.end();
    disposeAll(result);
  },
});
