import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import { disposeAll, startCopy, type Tensor } from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { bytesOf, hasGpu, randomArray, underSanitizer } from "./_helpers.ts";

// The stream-delay kernel is a test aid: `deno task test` loads the test-aid build.
const gpu = { ignore: !hasGpu }; // hasGpu includes the test aids
const delayStream = (device: number, us: number) => testAids!.delayStream(device, us);
const gc = (globalThis as { gc?: () => void }).gc;

// Each test first queues a kernel that holds the stream for GATE_US, so the
// copies queued after it are certainly still in flight while the test acts.
const GATE_US = 200_000;

function batch(seed: number): Float32Array[] {
  return Array.from({ length: 50 }, (_, i) => randomArray(Float32Array, 100 + i, seed * 100 + i));
}

Deno.test({
  ...gpu,
  name: "a copy in flight keeps its staging: a second copy gets other pinned memory",
  async fn() {
    const first = batch(1);
    const second = batch(2);
    delayStream(0, GATE_US);
    const a = startCopy(first, "cuda:0");
    assert.equal(a.ready(), false);
    const b = startCopy(second, "cuda:0");
    assert.equal(b.ready(), false);
    const [resultA, resultB] = await Promise.all([a.get(), b.get()]);
    resultA.forEach((t, i) => assert.deepEqual(bytesOf(t), bytesOf(first[i])));
    resultB.forEach((t, i) => assert.deepEqual(bytesOf(t), bytesOf(second[i])));
    disposeAll([resultA, resultB]);
  },
});

Deno.test({
  ...gpu,
  name: "a dropped handle keeps its staging until its copy is done, then gives it back",
  async fn() {
    const baseline = pinnedPool.stats().inUseBytes;
    delayStream(0, GATE_US);
    startCopy(batch(3), "cuda:0"); // the handle is dropped at once
    gc?.();
    // Still queued behind the gate: its pinned staging must not be reusable.
    assert.ok(pinnedPool.stats().inUseBytes > baseline);
    const inputs = Array.from({ length: 20 }, (_, i) => batch(10 + i));
    const busy = await Promise.all(inputs.map((input) => startCopy(input, "cuda:0").get()));
    busy.forEach((result, k) =>
      result.forEach((t, i) => assert.deepEqual(bytesOf(t), bytesOf(inputs[k][i])))
    );
    disposeAll(busy);
    // Those completed after the dropped copy (same stream); the next
    // startCopy settles it and returns its staging.
    const next = await startCopy([new Int8Array(1), new Int8Array(1)], "cuda:0").get();
    disposeAll(next);
    assert.equal(pinnedPool.stats().inUseBytes, baseline);
  },
});

Deno.test({
  ...gpu,
  name: "many copies started before any is awaited all land bit-exactly",
  async fn() {
    const inputs = Array.from({ length: 64 }, (_, i) => batch(100 + i));
    delayStream(0, GATE_US);
    const handles = inputs.map((input) => startCopy(input, "cuda:0"));
    assert.ok(handles.every((handle) => !handle.ready()));
    const results = await Promise.all(handles.map((handle) => handle.get()));
    results.forEach((result, k) =>
      result.forEach((t: Tensor, i: number) => assert.deepEqual(bytesOf(t), bytesOf(inputs[k][i])))
    );
    disposeAll(results);
  },
});

Deno.test({
  ...gpu,
  name:
    "1000 copies in flight in mixed directions (CPU→CUDA, CUDA→CPU, same device) land bit-exactly",
  async fn() {
    // Sources on the GPU for the CUDA→CPU and CUDA→CUDA copies.
    const deviceBase = devicePool(0).stats().inUseBytes;
    const onDeviceInputs = Array.from({ length: 8 }, (_, k) => batch(500 + k));
    const onDevice = await Promise.all(onDeviceInputs.map((b) => startCopy(b, "cuda:0").get()));
    const pinnedBase = pinnedPool.stats().inUseBytes;
    const startAll = () => {
      const started: { handle: ReturnType<typeof startCopy>; expected: Float32Array[] }[] = [];
      for (let i = 0; i < 1000; i++) {
        const k = i % 8;
        const kind = i % 4;
        if (kind === 0) {
          const input = batch(1000 + i);
          started.push({ handle: startCopy(input, "cuda:0"), expected: input });
        } else if (kind === 1) {
          started.push({ handle: startCopy(onDevice[k], "cpu"), expected: onDeviceInputs[k] });
        } else if (kind === 2) {
          // CUDA→same CUDA device returns new tensors over the same memory (a
          // one-GPU machine has no other device); CUDA→other CUDA is in
          // cuda_to_cuda_test.ts.
          started.push({ handle: startCopy(onDevice[k], "cuda:0"), expected: onDeviceInputs[k] });
        } else {
          const input = batch(1000 + i);
          started.push({ handle: startCopy(input, "cpu"), expected: input });
        }
      }
      return started;
    };
    // A first wave fills the pinned pool: each new pinned block costs
    // milliseconds (cuMemHostAlloc), so a cold start of 1000 copies takes
    // seconds. The second wave reuses the blocks and is checked in flight.
    // Results own their tensors: disposing every one leaves the inputs.
    disposeAll(await Promise.all(startAll().map((s) => s.handle.get())));
    const held = performance.now();
    delayStream(0, 5 * GATE_US);
    const started = startAll();
    // Under compute-sanitizer starting them takes longer than any hold: there
    // the test checks the bytes only.
    const early = underSanitizer
      ? -1
      : started.findIndex((s, i) => i % 4 === 0 && s.handle.ready());
    if (early >= 0) {
      const outcome = await started[early].handle.get().then(() => "resolved", String);
      const ms = (performance.now() - held).toFixed(0);
      assert.fail(`copy ${early} settled while the stream was held (${ms} ms in): ${outcome}`);
    }
    const results = await Promise.all(started.map((s) => s.handle.get()));
    for (let i = 0; i < results.length; i++) {
      const result = results[i] as Tensor[];
      const expected = started[i].expected;
      for (let j = 0; j < expected.length; j++) {
        assert.deepEqual(bytesOf(result[j]), bytesOf(expected[j]), `copy ${i}, tensor ${j}`);
      }
    }
    disposeAll(results);
    disposeAll(onDevice);
    assert.equal(pinnedPool.stats().inUseBytes, pinnedBase);
    assert.equal(devicePool(0).stats().inUseBytes, deviceBase);
  },
});
