/**
 * A user's script, outside the repository: imports @mtc/core from a remote
 * URL (`tests/remote/run.sh` copies it out of the repository and points its
 * `../../` imports at the server), copies the
 * reference batch plus one 16 MiB tensor (staged by the Worker pool) to
 * `cuda:0` where there is a GPU (else to the CPU), back to the CPU, and
 * checks every byte.
 *
 * @module
 */

import {
  closeStagingWorkers,
  cudaStatus,
  deviceCount,
  disposeAll,
  loadModule,
  prefetch,
  startCopy,
  Tensor,
} from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { shimInfo } from "../../ffi/library.ts";
import { STEP_KERNELS_PTX } from "../../examples/step_kernels_ptx.ts";

const status = cudaStatus();
console.log(`shim: ${shimInfo().file?.origin} ${status.shimPath}`);
console.log(`cuda: ${status.reason}: ${status.message}`);
const device = deviceCount() > 0 ? "cuda:0" : "cpu";

const big = new Float32Array(4 << 20);
for (let i = 0; i < big.length; i++) big[i] = Math.sin(i) * 1e6;
const input = { batch: createBatchMetaData(16), big };

function leaves(value: unknown, out: (Tensor | ArrayBufferView)[] = []) {
  if (value instanceof Tensor || ArrayBuffer.isView(value)) out.push(value);
  else if (Array.isArray(value)) value.forEach((v) => leaves(v, out));
  else if (value && typeof value === "object") Object.values(value).forEach((v) => leaves(v, out));
  return out;
}
function bytes(value: Tensor | ArrayBufferView): Uint8Array {
  const view = value instanceof Tensor ? value.toTypedArray() : value;
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

const start = performance.now();
const onDevice = await startCopy(input, device).get();
const back = await startCopy(onDevice, "cpu").get();
const ms = (performance.now() - start).toFixed(1);
const sent = leaves(input);
const received = leaves(back);
let total = 0;
for (let i = 0; i < sent.length; i++) {
  const a = bytes(sent[i]);
  const b = bytes(received[i]);
  if (a.length !== b.length || !a.every((x, k) => x === b[k])) {
    console.log(`MISMATCH at tensor ${i}`);
    Deno.exit(1);
  }
  total += a.length;
}
const where = leaves(onDevice).every((t) => (t as Tensor).device === device);
console.log(
  `round trip via ${device}: ${received.length} tensors, ${total} bytes, bit-exact, all on ${device}: ${where} (${ms} ms)`,
);
disposeAll([onDevice, back]);

// A prefetching loop over three batches, each checked against its source.
let steps = 0;
for await (
  const batch of prefetch([1, 2, 3].map((seed) => createBatchMetaData(16, seed)), device)
) {
  const source = leaves(createBatchMetaData(16, steps + 1));
  const copied = await startCopy(batch, "cpu").get();
  if (!leaves(copied).every((t, i) => bytes(t).every((x, k) => x === bytes(source[i])[k]))) {
    console.log(`MISMATCH in prefetched batch ${steps}`);
    Deno.exit(1);
  }
  disposeAll([batch, copied]);
  steps++;
}
console.log(`prefetch via ${device}: ${steps} batches, bit-exact`);
// A PTX kernel through the remote import: the driver JIT-compiles it.
if (device !== "cpu") {
  const module = await loadModule(STEP_KERNELS_PTX, { device });
  const scale = module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]);
  const values = Float32Array.from({ length: 1000 }, (_, i) => i);
  const [x] = await startCopy([values], device).get();
  const work = scale.launch({ grid: 4, block: 256, args: [x, 2, 1, values.length] });
  const [result] = await startCopy([x], "cpu", { after: work }).get();
  const got = result.toTypedArray() as Float32Array;
  if (!got.every((v, i) => v === values[i] * 2 + 1)) {
    console.log("MISMATCH in the kernel's result");
    Deno.exit(1);
  }
  disposeAll([x, result]);
  module.dispose();
  console.log(`kernel via ${device}: PTX loaded and launched, ${got.length} values match the CPU`);
}
await closeStagingWorkers();
