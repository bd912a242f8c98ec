import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import { deviceCount, disposeAll, startCopy } from "../../mod.ts";
import {
  assertRoundTrip,
  bytesOf,
  everyDtype,
  flatten,
  hasGpu,
  HOLD_US,
  randomArray,
} from "../gpu/_helpers.ts";

// What device_to_device.ts decides, for CUDA → another CUDA device: the
// small tensors of a source device gathered into one chunk (one kernel on
// the source) and sent with one peer copy, the others with one peer copy
// each (every one with packCpuTensors off), and each peer copy fenced with
// both devices' library streams. It needs two GPUs: a copy between tensors
// of one device never reaches this file (the outputs share the inputs'
// memory), so it decides nothing on one GPU or the CPU. cuda:0 → cuda:1 is
// in tests/gpu/cuda_to_cuda_test.ts; here cuda:1 → cuda:0.

const twoGpus = { ignore: !hasGpu || deviceCount() < 2 };

/** Thirteen small tensors of every class and one of 5 MB, on cuda:1. */
async function onSecondDevice(seed: number) {
  const input = { small: everyDtype(seed), large: randomArray(Uint8Array, 5_000_000, seed + 20) };
  return { input, onOne: await startCopy(input, "cuda:1").get() };
}

Deno.test({
  ...twoGpus,
  name:
    "small tensors of cuda:1 reach cuda:0 in one gathered chunk (one kernel, one peer copy), a large one by a peer copy of its own",
  async fn() {
    const { input, onOne } = await onSecondDevice(101);
    const kernels = testAids!.counters().kernels;
    const handle = startCopy(onOne, "cuda:0");
    const out = await handle.get();
    assert.equal(testAids!.counters().kernels - kernels, 1, "one gather kernel");
    const { packedTensors, chunks, copies } = handle.stats();
    assert.deepEqual({ packedTensors, chunks, copies }, {
      packedTensors: 13,
      chunks: 1,
      copies: 2,
    });
    assertRoundTrip(input, out, "cuda:0");
    disposeAll([onOne, out]);
  },
});

Deno.test({
  ...twoGpus,
  name: "with packCpuTensors off, every tensor of cuda:1 reaches cuda:0 by a peer copy of its own",
  async fn() {
    const { input, onOne } = await onSecondDevice(111);
    const kernels = testAids!.counters().kernels;
    const handle = startCopy(onOne, "cuda:0", { packCpuTensors: false });
    const out = await handle.get();
    assert.equal(testAids!.counters().kernels - kernels, 0, "no gather kernel");
    const { packedTensors, chunks, copies } = handle.stats();
    const leaves = flatten(input).length;
    assert.deepEqual({ packedTensors, chunks, copies }, {
      packedTensors: 0,
      chunks: 0,
      copies: leaves,
    });
    assertRoundTrip(input, out, "cuda:0");
    disposeAll([onOne, out]);
  },
});

Deno.test({
  ...twoGpus,
  name:
    "a peer copy runs after the source's queued writes, and the target's later work runs after it, without a CPU wait",
  async fn() {
    // Warm up cuda:1 → cuda:0 (peer access, the gather kernel's module).
    const warm = await onSecondDevice(121);
    disposeAll([warm.onOne, await startCopy(warm.onOne, "cuda:0").get()]);

    const input = [randomArray(Uint8Array, 100_000, 122), randomArray(Float32Array, 70_000, 123)];
    // cuda:1's library stream held: the write to cuda:1, and the peer copy
    // queued on that stream, run late; the read back from cuda:0 must wait.
    testAids!.delayStream(1, HOLD_US);
    const toOne = startCopy(input, "cuda:1");
    const toZero = startCopy(toOne.outputs(), "cuda:0");
    const back = startCopy(toZero.outputs(), "cpu");
    const result = await back.get();
    result.forEach((tensor, i) =>
      assert.deepEqual(bytesOf(tensor), bytesOf(input[i]), `leaf ${i}`)
    );
    disposeAll([await toOne.get(), await toZero.get(), result]);
  },
});
