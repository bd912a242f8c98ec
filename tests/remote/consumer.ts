/**
 * A user's script, outside the repository: imports @mtc/core through
 * `jsr:` (`tests/remote/run.sh` copies it into a directory whose deno.json
 * maps `@mtc/core` to `jsr:@mtc/core@<version>`, as `deno add` does, and
 * points `JSR_URL` at a local stand-in for JSR; in the repository the name
 * maps to `mod.ts`), checks that the package's value exports are the names given as
 * arguments, copies a batch of small tensors plus one 16 MiB tensor
 * (staged in the background) to `cuda:0` where there is a GPU (else to the
 * CPU), back to the CPU, checks every byte, and runs a prefetching loop;
 * on a GPU, also loads and launches a PTX kernel (the user's own PTX file,
 * copied beside it). Fails (exit 1) where the native shim could not be
 * loaded.
 *
 * @module
 */

import * as core from "@mtc/core";
import {
  cudaStatus,
  deviceCount,
  disposeAll,
  hostArena,
  loadModule,
  memoryStats,
  prefetch,
  releaseCachedMemory,
  startCopy,
  Tensor,
} from "@mtc/core";
import { STEP_KERNELS_PTX } from "../../examples/step_kernels_ptx.ts";

const expected = [...Deno.args].sort();
const actual = Object.keys(core).sort();
if (expected.length > 0 && JSON.stringify(expected) !== JSON.stringify(actual)) {
  console.log(`exports differ: expected ${expected.join(", ")}; got ${actual.join(", ")}`);
  Deno.exit(1);
}
console.log(`exports: ${actual.length} values through jsr:@mtc/core`);

const status = cudaStatus();
console.log(`shim: ${status.shimPath ?? "(none)"}`);
console.log(`cuda: ${status.reason}: ${status.message}`);
if (status.reason === "shim-unavailable") Deno.exit(1);
const device = deviceCount() > 0 ? "cuda:0" : "cpu";

/** A deterministic batch of small tensors of several dtypes, in arrays and objects. */
function batch(samples: number, seed: number) {
  let state = seed;
  const next = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
  return Array.from({ length: samples }, () => {
    const n = 1 + Math.floor(next() * 20);
    return {
      boxes: Tensor.from(Float32Array.from({ length: n * 4 }, next), [n, 4]),
      ids: BigInt64Array.from({ length: n }, () => BigInt(Math.floor(next() * 100))),
      active: Tensor.from(Uint8Array.from({ length: n }, () => next() > 0.5 ? 1 : 0), [n], "bool"),
      cams: [0, 1, 2].map(() => Float64Array.from({ length: 12 }, next)),
    };
  });
}

function leaves(value: unknown, out: (core.Tensor | ArrayBufferView)[] = []) {
  if (value instanceof Tensor || ArrayBuffer.isView(value)) out.push(value);
  else if (Array.isArray(value)) value.forEach((v) => leaves(v, out));
  else if (value && typeof value === "object") Object.values(value).forEach((v) => leaves(v, out));
  return out;
}
function bytes(value: core.Tensor | ArrayBufferView): Uint8Array {
  const view = value instanceof Tensor ? value.toTypedArray() : value;
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}
function same(a: unknown, b: unknown): boolean {
  const x = leaves(a);
  const y = leaves(b);
  return x.length === y.length &&
    x.every((leaf, i) => bytes(leaf).every((v, k) => v === bytes(y[i])[k]));
}

const big = new Float32Array(4 << 20);
for (let i = 0; i < big.length; i++) big[i] = Math.sin(i) * 1e6;
const input = { batch: batch(16, 1), big };
const onDevice = await startCopy(input, device).get();
const back = await startCopy(onDevice, "cpu").get();
if (!same(input, back)) {
  console.log("MISMATCH in the round trip");
  Deno.exit(1);
}
const count = leaves(input).length;
console.log(`round trip via ${device}: ${count} tensors, bit-exact`);
disposeAll([onDevice, back]);

// A batch built in a host arena (pinned where there is a GPU).
using arena = hostArena(1 << 16);
const fromArena = arena.float32(1000).fill(3);
const arenaCopy = await startCopy([fromArena], device).get();
disposeAll(arenaCopy);

let steps = 0;
for await (const copied of prefetch([1, 2, 3].map((seed) => batch(8, seed)), device)) {
  const onCpu = await startCopy(copied, "cpu").get();
  if (!same(batch(8, steps + 1), onCpu)) {
    console.log(`MISMATCH in prefetched batch ${steps}`);
    Deno.exit(1);
  }
  disposeAll([copied, onCpu]);
  steps++;
}
console.log(`prefetch via ${device}: ${steps} batches, bit-exact`);

// A PTX kernel through the jsr: import: the driver JIT-compiles it.
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
releaseCachedMemory();
console.log(`pools after release: ${memoryStats().pinned.reservedBytes} pinned bytes reserved`);
