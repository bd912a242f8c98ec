/**
 * Packing during a compiled walk (src/packed_walk.ts) against the plain
 * path (the generic walk, which packs after the walk): the same outputs,
 * bit for bit, for repeated structures whose leaves change between calls,
 * for walks the packed path hands over midway, and for failures, which
 * leave no memory behind; and walks that take a host arena's tensors
 * (sent from the arena as the route's runs send them). Each case also shows
 * the packed path ran.
 */

import assert from "node:assert/strict";
import {
  disposeAll,
  hostArena,
  memoryStats,
  setMemoryLimits,
  startCopy,
  Tensor,
  type TypedArray,
} from "../../mod.ts";
import { packedWalkCounts, resetPackedWalks } from "../../src/packed_walk.ts";
import { resetCompiledWalks, useCompiledWalks } from "../../src/walk/plan_cache.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { assertRoundTrip, hasGpu, plainValues, randomArray } from "./_helpers.ts";

/** Copies `data` to cuda:0 and back to plain values, with the copy's stats. */
async function copied(data: unknown): Promise<{ values: unknown; packedTensors: number }> {
  const handle = startCopy(data, "cuda:0");
  const result = await handle.get();
  const values = plainValues(result);
  disposeAll(result);
  return { values, packedTensors: handle.stats().packedTensors };
}

/** The plain path's copy of `data` (no compiled walk: nothing packs during it). */
async function plainCopy(data: unknown): Promise<unknown> {
  useCompiledWalks(false);
  try {
    return (await copied(data)).values;
  } finally {
    useCompiledWalks(true);
  }
}

/**
 * Copies each of `batches` (one structure) until a plan packs it, and
 * checks every packed copy against the plain path's; returns how many
 * walks packed and handed over meanwhile.
 */
async function compareWithPlain(
  batches: (() => unknown)[],
): Promise<{ packed: number; handedOver: number; arenaRuns: number }> {
  resetCompiledWalks();
  resetPackedWalks();
  // The structure's first walks are generic; a plan is compiled when it comes again.
  for (let i = 0; i < 4; i++) disposeAll(await startCopy(batches[0](), "cuda:0").get());
  const before = packedWalkCounts();
  for (const make of batches) {
    const data = make();
    const packed = await copied(data);
    assert.deepEqual(packed.values, await plainCopy(data));
  }
  const after = packedWalkCounts();
  return {
    packed: after.packed - before.packed,
    handedOver: after.handedOver - before.handedOver,
    arenaRuns: after.arenaRuns - before.arenaRuns,
  };
}

const float = (n: number, seed: number) => randomArray(Float32Array, n, seed);

Deno.test({
  name: "packed walks copy the reference batch as the plain path does, bit for bit",
  ignore: !hasGpu,
  async fn() {
    const counts = await compareWithPlain(
      Array.from({ length: 8 }, (_, seed) => () => createBatchMetaData(16, seed)),
    );
    assert.equal(counts.packed, 8);
    assert.equal(counts.handedOver, 0);
  },
});

Deno.test({
  name: "packed walks follow leaves that change class, dtype, size and offset between calls",
  ignore: !hasGpu,
  async fn() {
    // One structure; each call puts other leaves at its places: every
    // array class, empty leaves, views at odd offsets of larger buffers,
    // tensors whose dtype differs from their array's class.
    const classes = [Float64Array, Int8Array, Uint16Array, BigInt64Array, Uint8Array, Int32Array];
    const make = (call: number) => () => {
      const cls = classes[call % classes.length];
      const wide = randomArray(Uint8Array, 64 + call, call);
      return {
        a: randomArray(cls as never, call % 3 === 0 ? 0 : 5 + call, call) as TypedArray,
        b: [float(call, 10 + call), new Uint8Array(wide.buffer, 3 + (call % 5), 7)],
        "odd key \u2028": Tensor.from(randomArray(Uint16Array, 6, call), [2, 3], "bfloat16"),
        c: Tensor.from(randomArray(Uint8Array, 4, call).map((x) => x & 1), [4], "bool"),
        d: { nested: [float(1, call), float(2 * call + 1, call)] },
      };
    };
    const counts = await compareWithPlain(Array.from({ length: 12 }, (_, call) => make(call)));
    assert.equal(counts.packed, 12);
  },
});

Deno.test({
  name:
    "packed walks take payloads past 256 KB when their leaves are tiny, and copy them as the plain path does",
  ignore: !hasGpu,
  async fn() {
    // 30,000 leaves of 4-12 bytes (~480 KB at 16-byte alignment): past the
    // walk's usual limit, under its limit for tiny leaves, which the first
    // copies' payload opens.
    const tiny = (seed: number) => () =>
      Array.from({ length: 30_000 }, (_, i) => float(1 + ((i + seed) % 3), seed * 7 + i));
    const counts = await compareWithPlain(Array.from({ length: 3 }, (_, seed) => tiny(seed)));
    assert.equal(counts.packed, 3);
    assert.equal(counts.handedOver, 0);
    // Larger leaves of the same payload are left to the threads after the walk.
    const large = (seed: number) => () =>
      Array.from({ length: 120 }, (_, i) => float(1024 + i, seed * 7 + i));
    const largeCounts = await compareWithPlain(Array.from({ length: 2 }, (_, seed) => large(seed)));
    assert.equal(largeCounts.packed, 0);
  },
});

Deno.test({
  name:
    "a structure that always hands over pauses its own packed walks, not those of another structure copied in the same loop",
  ignore: !hasGpu,
  async fn() {
    resetCompiledWalks();
    resetPackedWalks();
    const onDevice = await startCopy(float(9, 1), "cuda:0").get();
    // A batch that packs, and a structure whose third leaf is already on the device.
    const batch = () => ({ x: float(4, 1), y: [float(6, 2), float(3, 3)] });
    // (Other keys: a structure of its own, with a plan of its own.)
    const mixed = () => ({ p: float(4, 1), q: [float(6, 2), onDevice] });
    for (let i = 0; i < 4; i++) {
      disposeAll(await startCopy(batch(), "cuda:0").get());
      disposeAll(await startCopy(mixed(), "cuda:0").get());
    }
    const before = packedWalkCounts();
    for (let i = 0; i < 20; i++) {
      const data = batch();
      const result = await startCopy(data, "cuda:0").get();
      assertRoundTrip(data, result, "cuda:0");
      disposeAll(result);
      disposeAll(await startCopy(mixed(), "cuda:0").get());
    }
    const after = packedWalkCounts();
    // Every batch copy packed during its walk (with one history for all
    // structures, the other's hand-overs paused them for 64 copies).
    assert.equal(after.packed - before.packed, 20);
    assert.ok(after.handedOver - before.handedOver <= 2, "the other structure pauses itself");
    disposeAll(onDevice);
  },
});

Deno.test({
  name:
    "a packed walk hands over to the route at a leaf it cannot take, and the copy is the plain path's",
  ignore: !hasGpu,
  async fn() {
    const onDevice = await startCopy(float(9, 1), "cuda:0").get();
    const pinned = await startCopy(onDevice, "cpu").get();
    using arena = hostArena(4096);
    const inArena = arena.float32(5);
    inArena.set([1, 2, 3, 4, 5]);
    // The same structure each time: its third leaf is, in turn, one the
    // packed walk takes, a device tensor, a pinned tensor, a leaf in a host
    // arena, a Map (left to the generic walk), and one too large to pack.
    const thirds: (() => unknown)[] = [
      () => float(3, 7),
      () => onDevice,
      () => pinned,
      () => inArena,
      () => new Map([["m", float(4, 8)]]),
      () => float(300_000, 9),
    ];
    // (Each case forgets the hand-overs before it: two in a row pause packing.)
    const counts = await compareWithPlain(thirds.map((third, i) => () => {
      resetPackedWalks();
      return { x: float(4, i), y: [float(6, i)], z: third(), w: float(2, i) };
    }));
    assert.equal(counts.packed, 1);
    assert.equal(counts.handedOver, 5);
    disposeAll([onDevice, pinned]);
  },
});

Deno.test({
  name:
    "a packed walk whose payload outgrows its block hands over, and the next one takes a larger block",
  ignore: !hasGpu,
  async fn() {
    const sized = (n: number) => () => Array.from({ length: 16 }, (_, i) => float(n, n + i));
    // 16 × 64 floats, then 16 × 2048 (128 KB: past the block the first took).
    const counts = await compareWithPlain([sized(64), sized(2048), sized(2048), sized(2048)]);
    assert.equal(counts.handedOver, 1);
    assert.equal(counts.packed, 3);
  },
});

Deno.test({
  name:
    "a packed walk that meets a disposed tensor or a detached buffer throws and keeps no pinned memory",
  ignore: !hasGpu,
  async fn() {
    const make = (last: unknown) => ({ a: float(100, 1), b: [float(7, 2), float(9, 3)], c: last });
    resetCompiledWalks();
    resetPackedWalks();
    for (let i = 0; i < 4; i++) disposeAll(await startCopy(make(float(3, i)), "cuda:0").get());
    const inUse = memoryStats().pinned.inUseBytes;
    const disposed = Tensor.from(float(3, 5));
    disposed.dispose();
    assert.throws(() => startCopy(make(disposed), "cuda:0"), /disposed/);
    const detached = float(3, 6);
    structuredClone(detached.buffer, { transfer: [detached.buffer] });
    assert.throws(() => startCopy(make(detached), "cuda:0"), TypeError);
    assert.equal(memoryStats().pinned.inUseBytes, inUse);
    // Packing pauses after two hand-overs in a row, then the structure packs again.
    const before = packedWalkCounts().packed;
    for (let i = 0; i < 80 && packedWalkCounts().packed === before; i++) {
      disposeAll(await startCopy(make(float(3, 7)), "cuda:0").get());
    }
    assert.equal(packedWalkCounts().packed, before + 1);
  },
});

Deno.test({
  name:
    "walks of batches built in a host arena take their tensors and copy as the plain path does, bit for bit",
  ignore: !hasGpu,
  async fn() {
    using arena = hostArena(4 << 20);
    // The reference batch (its producer fills the arena out of the walk's
    // order) over 6 seeds, the arena reset between batches; then batches
    // that start past the arena's first byte, and one with a gap wider than
    // a run may carry (two runs: outputs bound again at the transfer).
    const fresh = (seed: number) => () => {
      arena.reset();
      return createBatchMetaData(16, seed, arena);
    };
    const later = (seed: number, gap: number) => () => {
      arena.reset();
      arena.uint8(40 + seed);
      const head = Tensor.from(arena.float32(3).fill(seed));
      arena.uint8(gap);
      return { head, batch: createBatchMetaData(16, seed, arena) };
    };
    const batches = [0, 1, 2, 3, 4, 5].map(fresh);
    const counts = await compareWithPlain(batches);
    assert.equal(counts.arenaRuns, 6);
    assert.equal(counts.handedOver, 0);
    const shifted = await compareWithPlain([later(1, 8), later(2, 8), later(3, 9000)]);
    assert.equal(shifted.arenaRuns, 3);
    assert.equal(shifted.handedOver, 0);
    // Every copy settled and disposed: the arena resets.
    arena.reset();
  },
});

Deno.test({
  name:
    "an arena walk hands over to the route at a leaf of another arena, of ordinary or device memory, and the copy is the plain path's",
  ignore: !hasGpu,
  async fn() {
    using one = hostArena(1 << 16);
    using two = hostArena(1 << 16);
    const onDevice = await startCopy(float(5, 1), "cuda:0").get();
    const fill = (n: number, seed: number) => one.float32(n).fill(seed);
    const thirds: (() => unknown)[] = [
      () => Tensor.from(fill(6, 3)),
      () => Tensor.from(two.float32(4).fill(4)),
      () => Tensor.from(float(4, 5)),
      () => float(4, 6),
      () => onDevice,
    ];
    const counts = await compareWithPlain(thirds.map((third, i) => () => {
      resetPackedWalks();
      one.reset();
      two.reset();
      return {
        x: Tensor.from(fill(4, i)),
        y: [Tensor.from(fill(9, i))],
        z: third(),
        w: float(2, i),
      };
    }));
    // The first: three arena tensors, then a leaf of ordinary memory (the
    // last, w): that too is a hand-over.
    assert.equal(counts.handedOver, 5);
    assert.equal(counts.packed, 0);
    const all = await compareWithPlain([0, 1].map((i) => () => {
      one.reset();
      return {
        x: Tensor.from(fill(4, i)),
        y: [Tensor.from(fill(9, i))],
        z: Tensor.from(fill(3, i)),
      };
    }));
    assert.equal(all.arenaRuns, 2);
    disposeAll(onDevice);
  },
});

Deno.test({
  name:
    "an arena walk that meets a disposed tensor of its arena throws and holds the arena no longer",
  ignore: !hasGpu,
  async fn() {
    using arena = hostArena(1 << 16);
    const make = (last: Tensor) => ({
      a: Tensor.from(arena.float32(8)),
      b: [Tensor.from(arena.int32(3))],
      c: last,
    });
    resetCompiledWalks();
    resetPackedWalks();
    for (let i = 0; i < 4; i++) {
      disposeAll(await startCopy(make(Tensor.from(arena.float32(2))), "cuda:0").get());
    }
    const before = packedWalkCounts();
    const disposed = Tensor.from(arena.float32(2));
    disposed.dispose();
    assert.throws(() => startCopy(make(disposed), "cuda:0"), /disposed/);
    assert.equal(packedWalkCounts().handedOver, before.handedOver + 1);
    // Nothing holds the arena: it resets.
    arena.reset();
  },
});

Deno.test({
  name:
    "under a pinned limit below twice a copy's staging, each copy reuses the idle staging block: no pinned allocation per copy",
  ignore: !hasGpu,
  async fn() {
    // ~110 KB of small leaves: the route stages them in a 128 KB block; the
    // walk asks for 1.25 times the last payload, a 256 KB block, which a
    // 200 KB limit never admits. Two frees of the idle 128 KB block made
    // every copy allocate its staging again: the walk's asking for room for
    // a block that could never fit, and the admission's counting the idle
    // block the copy then takes as memory added (each fix alone: 10
    // allocations in 10 copies).
    const batch = Array.from({ length: 440 }, (_, i) => float(64, i));
    const limits = setMemoryLimits({});
    resetCompiledWalks();
    resetPackedWalks();
    try {
      setMemoryLimits({ pinnedBytes: 200 * 1024 });
      for (let i = 0; i < 4; i++) disposeAll(await startCopy(batch, "cuda:0").get());
      const before = memoryStats().pinned.allocations;
      for (let i = 0; i < 10; i++) disposeAll(await startCopy(batch, "cuda:0").get());
      assert.equal(memoryStats().pinned.allocations, before);
      // (Reading the result back takes pinned memory of its own: last.)
      const result = await startCopy(batch, "cuda:0").get();
      assertRoundTrip(batch, result, "cuda:0");
      disposeAll(result);
    } finally {
      setMemoryLimits(limits);
    }
  },
});
