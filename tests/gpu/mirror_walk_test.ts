/**
 * Copies back during a compiled walk (src/mirror_walk.ts) against the plain
 * path (the generic walk, whose transfer finds the runs): the same outputs,
 * bit for bit, for results copied back whole, for walks handed over midway
 * or at their end, and for failures, which leave no memory behind; and the
 * outputs' pinned block kept from the next copy while the copy back still
 * writes it. Each case also shows the walk ran.
 */

import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  disposeAll,
  hostArena,
  loadModule,
  memoryStats,
  setMemoryLimits,
  startCopy,
  Tensor,
} from "../../mod.ts";
import { mirrorWalkCounts, resetMirrorWalks } from "../../src/mirror_walk.ts";
import { resetCompiledWalks, useCompiledWalks } from "../../src/walk/plan_cache.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import {
  disposeBackEarly,
  hasGpu,
  HOLD_US,
  plainValues,
  randomArray,
  stepKernelsPtx,
} from "./_helpers.ts";

/** Copies `data` to the CPU and back to plain values. */
async function copiedBack(data: unknown): Promise<unknown> {
  const result = await startCopy(data, "cpu").get();
  const values = plainValues(result);
  disposeAll(result);
  return values;
}

/**
 * Copies each of `inputs` (one structure, on the device) back until a plan
 * walks it, and checks every copy against the plain path's; returns how
 * many walks took every leaf and how many handed over meanwhile.
 */
async function compareWithPlain(inputs: unknown[]): Promise<{ taken: number; handedOver: number }> {
  resetCompiledWalks();
  // The structure's first walks are generic; a plan is compiled when it comes again.
  // Results made by the generic walk and by a plan differ in their
  // objects' hidden classes: each input's own structure gets its plan.
  for (const input of [inputs[0], ...inputs, ...inputs]) await copiedBack(input);
  // (Warm-up walks that handed over would have paused the walks.)
  resetMirrorWalks();
  const before = mirrorWalkCounts();
  for (const input of inputs) {
    const walked = await copiedBack(input);
    useCompiledWalks(false);
    try {
      assert.deepEqual(walked, await copiedBack(input));
    } finally {
      useCompiledWalks(true);
    }
  }
  const after = mirrorWalkCounts();
  return { taken: after.taken - before.taken, handedOver: after.handedOver - before.handedOver };
}

const float = (n: number, seed: number) => randomArray(Float32Array, n, seed);

Deno.test({
  name: "mirror walks copy the reference batch's results back as the plain path does, bit for bit",
  ignore: !hasGpu,
  async fn() {
    resetMirrorWalks();
    const results = [];
    for (let seed = 0; seed < 6; seed++) {
      results.push(await startCopy(createBatchMetaData(16, seed), "cuda:0").get());
    }
    const counts = await compareWithPlain(results);
    assert.equal(counts.taken, 6);
    assert.equal(counts.handedOver, 0);
    disposeAll(results);
  },
});

Deno.test({
  name:
    "a mirror walk hands over to the route at a leaf that would not join its run, and the copy is the plain path's",
  ignore: !hasGpu,
  async fn() {
    const up = async <T>(data: T) => await startCopy(data, "cuda:0").get();
    const [other] = await up([float(5, 9)]);
    const [large] = await up([float(70_000, 8)]); // 280 KB: past a packed leaf
    // One structure; its third leaf is, in turn, one that joins the run, a
    // tensor of another block, a CPU tensor, one too large, and an empty
    // one of another copy (an empty leaf joins a run wherever it lies).
    const thirds: (() => unknown)[] = [
      () => float(3, 7),
      () => other,
      () => Tensor.from(float(3, 3)),
      () => large,
      () => float(0, 1),
    ];
    const inputs = [];
    for (const [i, third] of thirds.entries()) {
      const result = await up({ x: float(4, i), y: [float(6, i)], z: float(3, i), w: float(2, i) });
      inputs.push(result);
      if (i === 0) continue; // its z lies in the run
      result.z.dispose();
      const z = third();
      // (A device tensor stands in the result as it is; the others as copied.)
      result.z = (z instanceof Tensor ? z : (await up([z as Float32Array]))[0]) as never;
    }
    const hands = [];
    for (const input of inputs) hands.push(await compareWithPlain([input]));
    assert.deepEqual(hands.map((h) => [h.taken, h.handedOver]), [
      [1, 0],
      [0, 1],
      [0, 1],
      [0, 1],
      [1, 0],
    ]);
    const reversed = await up(Array.from({ length: 8 }, (_, i) => float(4, i)));
    assert.equal((await compareWithPlain([reversed.toReversed()])).handedOver, 1);
    // A lone leaf: handed over at the walk's end.
    assert.deepEqual(await compareWithPlain([{ only: other }]), { taken: 0, handedOver: 1 });
    disposeAll([other, large, inputs, reversed]);
  },
});

Deno.test({
  name: "a mirror walk that meets a disposed tensor throws and keeps no pinned memory",
  ignore: !hasGpu,
  async fn() {
    resetMirrorWalks();
    const make = async (n: number) =>
      await startCopy({ a: float(100, n), b: [float(7, n)] }, "cuda:0").get();
    const result = await make(1);
    resetCompiledWalks();
    for (let i = 0; i < 4; i++) await copiedBack(result);
    const inUse = memoryStats().pinned.inUseBytes;
    const broken = await make(2);
    broken.b[0].dispose();
    const before = mirrorWalkCounts().handedOver;
    assert.throws(() => startCopy(broken, "cpu"), /disposed/);
    assert.equal(mirrorWalkCounts().handedOver, before + 1);
    assert.equal(memoryStats().pinned.inUseBytes, inUse);
    disposeAll([result, broken]);
  },
});

Deno.test({
  name:
    "outputs of a walked copy back disposed before it completes keep their pinned block from the next copy until it has",
  ignore: !hasGpu,
  async fn() {
    // 64 tensors of 16 KB in one device chunk, copied back in order: one run.
    const sources = Array.from({ length: 64 }, (_, i) => new Uint8Array(16 << 10).fill(i));
    const onDevice = await startCopy(sources, "cuda:0").get();
    using arena = hostArena(256 << 20);
    resetCompiledWalks();
    resetMirrorWalks();
    for (let i = 0; i < 4; i++) await copiedBack(onDevice);
    const before = mirrorWalkCounts().taken;
    try {
      for (let round = 0; round < 3; round++) {
        const mine = sources.map((source) => new Uint8Array(source.length).fill(200 + round));
        const landed = await disposeBackEarly(arena, () => startCopy(onDevice, "cpu"), mine);
        landed.forEach((bytes, k) => {
          const wrong = (bytes as Uint8Array).findIndex((byte) => byte !== 200 + round);
          assert.equal(wrong, -1, `round ${round}: tensor ${k}, byte ${wrong}`);
        });
      }
      assert.ok(mirrorWalkCounts().taken >= before + 3, "the copies back were walked");
    } finally {
      disposeAll(onDevice);
    }
  },
});

Deno.test({
  name: "a walked copy back with after waits on the GPU for that work on its source device",
  ignore: !hasGpu,
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const scale = module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]);
    const values = Float32Array.from({ length: 1000 }, (_, i) => i);
    // Two tensors of one copy: one run when copied back.
    const result = await startCopy({ x: values, y: new Float32Array(4) }, "cuda:0").get();
    resetCompiledWalks();
    resetMirrorWalks();
    for (let i = 0; i < 4; i++) await copiedBack(result);
    const before = mirrorWalkCounts().taken;
    using stream = createStream("cuda:0");
    testAids!.delayOn(stream, HOLD_US);
    scale.launch({ grid: 4, block: 256, args: [result.x, 2, 1, values.length], stream });
    const back = startCopy(result, "cpu", { after: stream });
    assert.equal(mirrorWalkCounts().taken, before + 1, "the copy back was walked");
    assert.equal(back.ready(), false);
    const { x } = await back.get();
    assert.deepEqual([...x.toTypedArray()], [...values].map((v) => v * 2 + 1));
    disposeAll([result, await back.get()]);
    module.dispose();
  },
});

Deno.test({
  name:
    "a walked copy back waits under the pinned limit holding its input, which may be disposed meanwhile, and lands bit-exact",
  ignore: !hasGpu,
  async fn() {
    const MiB = 1 << 20;
    // 64 tensors of 64 KB in one device chunk: one run of 4 MiB.
    const sources = Array.from({ length: 64 }, (_, i) => randomArray(Uint8Array, 64 << 10, i));
    const onDevice = await startCopy(sources, "cuda:0").get();
    resetCompiledWalks();
    resetMirrorWalks();
    for (let i = 0; i < 4; i++) await copiedBack(onDevice);
    const base = memoryStats().pinned.inUseBytes;
    const before = setMemoryLimits({});
    try {
      setMemoryLimits({ pinnedBytes: base + 6 * MiB, waitMs: 10_000 });
      const taken = mirrorWalkCounts().taken;
      const first = await startCopy(onDevice, "cpu").get();
      const second = startCopy(onDevice, "cpu");
      assert.equal(mirrorWalkCounts().taken, taken + 2, "both copies back were walked");
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(second.ready(), false, "the second waits for pinned memory");
      disposeAll(onDevice); // held by the waiting copy until it settles
      disposeAll(first);
      const back = await second.get();
      back.forEach((tensor: Tensor, k: number) => {
        assert.deepEqual(tensor.toTypedArray(), sources[k], `tensor ${k}`);
      });
      disposeAll(back);
    } finally {
      setMemoryLimits(before);
    }
    assert.equal(memoryStats().pinned.inUseBytes, base);
  },
});
