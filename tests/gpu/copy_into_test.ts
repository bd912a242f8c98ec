import { freezeContainers } from "../../examples/freeze_containers.ts";
import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  CudaError,
  defaultStream,
  disposeAll,
  hostArena,
  loadModule,
  startCopy,
  Tensor,
} from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { frozenCounts, whenFrozenPathReady } from "../../src/transfer/into/frozen.ts";
import { intoOrdering } from "../../src/transfer/into/holds.ts";
import {
  bytesOf,
  flatten,
  hasGpu,
  HOLD_US,
  ptrAddress,
  randomArray,
  stepKernelsPtx,
  underSanitizer,
} from "./_helpers.ts";

// startCopy(data, device, { into: previous }) writes data's bytes into an
// earlier result's memory and resolves with that result itself; it refuses
// data of another structure and results whose memory others may see, and
// waits on the GPU for kernels still reading the result.

const gpu = { ignore: !hasGpu };

function batch(seed: number) {
  return {
    boxes: Tensor.from(randomArray(Float32Array, 8, seed), [2, 4]),
    ids: randomArray(BigInt64Array, 3, seed + 1),
    active: Tensor.from(randomArray(Uint8Array, 2, seed + 2), [2], "bool"),
    empty: new Int32Array(0),
    large: randomArray(Float32Array, 300_000, seed + 3), // unpacked: its own block
    name: `step ${seed}`,
  };
}

function assertSameBytes(result: unknown, data: unknown): void {
  const outputs = flatten(result);
  const inputs = flatten(data);
  assert.equal(outputs.length, inputs.length);
  outputs.forEach((output, i) =>
    assert.deepEqual(bytesOf(output as Tensor), bytesOf(inputs[i] as Tensor), `leaf ${i}`)
  );
}

Deno.test({
  ...gpu,
  name: "into: the result itself comes back, its tensors holding the new bytes, nothing allocated",
  async fn() {
    const previous = await startCopy(batch(1), "cuda:0").get();
    const tensors = flatten(previous);
    const misses = devicePool(0).stats().misses;
    const next = batch(2);
    const handle = startCopy(next, "cuda:0", { into: previous });
    const result = await handle.get();
    assert.equal(result, previous);
    assert.deepEqual(flatten(result), tensors, "the same Tensor instances");
    assert.equal(result.name, "step 2", "values passed through are written");
    assertSameBytes(result, next);
    assert.equal(devicePool(0).stats().misses, misses);
    const stats = handle.stats();
    assert.equal(stats.tensors, 5);
    assert.equal(stats.bytes, 8 * 4 + 3 * 8 + 2 + 300_000 * 4);
    assert.equal(stats.chunks, 1, "the packed chunk");
    assert.equal(stats.copies, 2, "one DMA for the chunk, one for the large tensor");
    // And again, with Tensor leaves where TypedArrays were (same dtype and shape).
    const third = batch(3);
    await startCopy({ ...third, ids: Tensor.from(third.ids) }, "cuda:0", { into: previous }).get();
    assertSameBytes(previous, third);
    disposeAll(previous);
  },
});

Deno.test({
  ...gpu,
  name: "into: a batch built in a hostArena at the same offsets is one DMA from the arena",
  async fn() {
    using arena = hostArena(1 << 20);
    const data = createBatchMetaData(16, 1, arena);
    const previous = await startCopy(data, "cuda:0").get();
    // New contents at the same offsets (a producer refilling its arena).
    for (const [i, leaf] of flatten(data).entries()) {
      const bytes = (leaf as Tensor).toTypedArray();
      new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength).set(
        randomArray(Uint8Array, bytes.byteLength, 100 + i),
      );
    }
    const handle = startCopy(data, "cuda:0", { into: previous });
    assert.equal(await handle.get(), previous);
    assert.deepEqual(handle.stats(), {
      tensors: 528,
      bytes: handle.stats().bytes,
      packedTensors: 528,
      chunks: 1,
      copies: 1,
    });
    assertSameBytes(previous, data);
    // Ordinary leaves into the same result: one pack, one DMA.
    const ordinary = createBatchMetaData(16, 1); // the same shapes (the arena's bytes changed)
    const packed = startCopy(ordinary, "cuda:0", { into: previous });
    await packed.get();
    assert.equal(packed.stats().copies, 1);
    assertSameBytes(previous, ordinary);
    disposeAll(previous);
  },
});

Deno.test({
  ...gpu,
  name: "into: a frozen batch and result are not read again, and every step's bytes arrive",
  async fn() {
    const arena = hostArena(1 << 20);
    const data = freezeContainers(createBatchMetaData(16, 1, arena));
    const previous = freezeContainers(await startCopy(data, "cuda:0").get());
    const leaves = flatten(data) as Tensor[];
    await whenFrozenPathReady(); // (in a fresh process: a copy or two later otherwise)
    const start = { ...frozenCounts };
    for (let step = 0; step < 6; step++) {
      for (const [i, leaf] of leaves.entries()) {
        const bytes = leaf.toTypedArray();
        new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength).set(
          randomArray(Uint8Array, bytes.byteLength, 1000 * step + i),
        );
      }
      const handle = startCopy(data, "cuda:0", { into: previous });
      assert.equal(await handle.get(), previous);
      assert.equal(handle.stats().copies, 1, "one DMA from the arena");
      assertSameBytes(previous, data);
    }
    // Checked twice in full (a root met twice), then taken: the data's
    // structure from the third copy on, the result's from the fourth.
    assert.deepEqual(frozenCounts, { structure: start.structure + 4, result: start.result + 3 });
    // Bytes gone are found as before: a leaf disposed, then the arena.
    leaves[7].dispose();
    assert.throws(() => startCopy(data, "cuda:0", { into: previous }), /disposed tensor/);
    arena.dispose();
    assert.throws(() => startCopy(data, "cuda:0", { into: previous }), /detached/);
    disposeAll(previous);
  },
});

for (const [site, arena] of [["copy", false], ["copy", true], ["event-record", false]] as const) {
  Deno.test({
    ...gpu,
    name: `into: a failed ${site} (CUDA error 719)${
      arena ? " from an arena" : ""
    } rejects get() with a CudaError, gives its staging back and leaves the result writable`,
    async fn() {
      const arenaMemory = arena ? hostArena(1 << 20) : undefined;
      const make = (seed: number) => {
        const data = batch(seed);
        if (arenaMemory === undefined) return data;
        arenaMemory.reset();
        const ids = arenaMemory.array(BigInt64Array, 3);
        ids.set(data.ids);
        return { ...data, ids };
      };
      const previous = await startCopy(make(1), "cuda:0").get();
      const device = devicePool(0).stats().inUseBytes;
      const pinned = pinnedPool.stats().inUseBytes;
      testAids!.injectFault(site, { error: 719 });
      let failure: unknown;
      try {
        await startCopy(make(2), "cuda:0", { into: previous }).get().catch((e) => failure = e);
      } finally {
        testAids!.injectFault("off");
      }
      assert.ok(failure instanceof CudaError, `expected a CudaError, got ${failure}`);
      assert.equal(failure.code, 719);
      assert.equal(pinnedPool.stats().inUseBytes, pinned, "staging given back");
      assert.equal(
        devicePool(0).stats().inUseBytes,
        device,
        "the result keeps its memory, no more",
      );
      // Not left busy: the next copy into it goes, bit-exact.
      const data = make(3);
      assert.equal(await startCopy(data, "cuda:0", { into: previous }).get(), previous);
      assertSameBytes(previous, data);
      disposeAll(previous);
      arenaMemory?.dispose();
    },
  });
}

Deno.test({
  ...gpu,
  name:
    "into: a result container that refuses a write (frozen, read-only) is a TypeError naming the key, and nothing is written",
  async fn() {
    const nested = (seed: number) => ({ first: batch(seed), second: { label: `label ${seed}` } });
    const previous = await startCopy(nested(1), "cuda:0").get();
    const before = flatten(previous).map((t) => bytesOf(t as Tensor));
    // first.name is written before second.label, which refuses.
    Object.freeze(previous.second);
    assert.throws(
      () => startCopy(nested(2), "cuda:0", { into: previous }),
      (error: unknown) =>
        error instanceof TypeError &&
        /^Cannot copy into this result: its value at key "label" cannot be written \(.*\); nothing was written$/
          .test(error.message),
    );
    assert.equal(previous.first.name, "step 1", "the write before the refused one is undone");
    assert.equal(previous.second.label, "label 1");
    flatten(previous).forEach((t, i) => assert.deepEqual(bytesOf(t as Tensor), before[i]));
    // Nothing was taken (no copy into it counts as in flight): the next
    // attempt is refused for the same reason, not as a copy still writing.
    assert.throws(() => startCopy(nested(3), "cuda:0", { into: previous }), /key "label"/);
    disposeAll(previous);
  },
});

Deno.test({
  ...gpu,
  name: "into: data of another structure, dtype or shape is a TypeError, and nothing is written",
  async fn() {
    const previous = await startCopy(batch(1), "cuda:0").get();
    const before = flatten(previous).map((t) => bytesOf(t as Tensor));
    const cases: [unknown, RegExp][] = [
      [{ ...batch(2), extra: 1 }, /^Invalid option into: expected a plain object with keys/],
      [
        { ...batch(2), ids: new BigInt64Array(4) },
        /expected a int64 tensor of shape \[3\] .* at \$\.ids, got a BigInt64Array of 4/,
      ],
      [{ ...batch(2), ids: new Float64Array(3) }, /at \$\.ids, got a Float64Array/],
      [
        { ...batch(2), boxes: Tensor.from(new Float32Array(8), [4, 2]) },
        /shape \[2, 4\] .* at \$\.boxes/,
      ],
      [[batch(2)], /expected a plain object at \$, got an array/],
      [{ ...batch(2), name: [1] }, /expected a value passed through .* at \$\.name/],
    ];
    for (const [data, message] of cases) {
      assert.throws(
        () => startCopy(data, "cuda:0", { into: previous }),
        (error: unknown) => error instanceof TypeError && message.test(error.message),
        String(message),
      );
    }
    const [onDevice] = await startCopy([new Float32Array(8)], "cuda:0").get();
    assert.throws(
      () => startCopy({ ...batch(2), boxes: onDevice }, "cuda:0", { into: previous }),
      /expected CPU data at \$\.boxes/,
    );
    assert.equal(previous.name, "step 1");
    flatten(previous).forEach((t, i) => assert.deepEqual(bytesOf(t as Tensor), before[i]));
    disposeAll([previous, onDevice]);
  },
});

Deno.test({
  ...gpu,
  name:
    "into: results others may see are refused (not a result, shared memory, disposed, in flight)",
  async fn() {
    const data = { x: new Float32Array(4), y: new Uint8Array(3) };
    assert.throws(
      () => startCopy(data, "cuda:0", { into: { x: 1 } }),
      /^Error: Cannot copy into this value: it holds no tensor/,
    );
    const onCpu = await startCopy(data, "cpu").get();
    assert.throws(
      () => startCopy(data, "cuda:0", { into: onCpu }),
      /Cannot copy into this value: \$\.x is a tensor on cpu, not cuda:0/,
    );
    const [onDevice] = await startCopy([new Float32Array(4)], "cuda:0").get();
    const mixed = await startCopy({ x: onDevice, y: new Uint8Array(3) }, "cuda:0").get();
    assert.throws(
      () => startCopy(data, "cuda:0", { into: mixed }),
      /something else holds its memory/,
      "a result sharing a tensor that was on the target already",
    );
    disposeAll([onDevice, mixed]);

    const previous = await startCopy(data, "cuda:0").get();
    const shared = await startCopy(previous, "cuda:0").get(); // shares, does not copy
    assert.throws(
      () => startCopy(data, "cuda:0", { into: previous }),
      /something else holds its memory \(2 more holds/,
    );
    disposeAll(shared);
    await startCopy(data, "cuda:0", { into: previous }).get();

    testAids!.delayStream(0, HOLD_US);
    const first = startCopy(data, "cuda:0", { into: previous });
    assert.throws(() => startCopy(data, "cuda:0", { into: previous }), /still writing: await/);
    assert.equal(await first.get(), previous);

    previous.y.dispose();
    assert.throws(
      () => startCopy(data, "cuda:0", { into: previous }),
      /Cannot copy into this result: its tensor .* was disposed/,
    );
    disposeAll(previous);
  },
});

Deno.test({
  ...gpu,
  name:
    "into: a result whose tensor was disposed is refused even where another tensor's hold over its memory balances the count",
  async fn() {
    // The count of holds alone (the result's tensors, launches, reading
    // copies) came out right here: one tensor of the result disposed, one
    // tensor of the user's over the same memory. The copy then wrote over
    // the user's tensor.
    const data = [new Float32Array([1, 2, 3, 4]), new Float32Array([5, 6, 7, 8])];
    const result = await startCopy(data, "cuda:0").get();
    await startCopy(data, "cuda:0", { into: result }).get();
    const [mine] = await startCopy([result[0]], "cuda:0").get(); // over result[0]'s memory
    result[0].dispose();
    assert.throws(
      () =>
        startCopy([new Float32Array(4).fill(9), new Float32Array(4)], "cuda:0", { into: result }),
      /Cannot copy into this result: its tensor 0 \(in the walk's order\) was disposed/,
    );
    const [back] = await startCopy([mine], "cpu").get();
    assert.deepEqual([...(back as Tensor).toTypedArray()], [1, 2, 3, 4]);
    disposeAll([result, mine, back]);
  },
});

/**
 * A kernel reads the result's tensor (held back by a spinning kernel before
 * it on the compute stream) into `out`, while the next copy into the result
 * is queued. Returns what the kernel read, and the two contents.
 */
async function kernelReadsWhileCopyIntoQueued(): Promise<
  { read: Uint8Array; old: Uint8Array; next: Uint8Array; after: Uint8Array }
> {
  const module = await loadModule(await stepKernelsPtx());
  const spin = module.kernel("spin_ns", ["u64"]);
  const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
  const bytes = 64 * 1024;
  const old = randomArray(Uint8Array, bytes, 51);
  const next = randomArray(Uint8Array, bytes, 52);
  const previous = await startCopy([old], "cuda:0").get();
  const [out] = await startCopy([new Uint8Array(bytes)], "cuda:0").get();
  const stream = defaultStream("cuda:0");
  spin.launch({ grid: 1, block: 1, args: [BigInt(HOLD_US * 1000)], stream });
  const work = copyU8.launch({ grid: 16, block: 256, args: [previous[0], out, bytes], stream });
  const result = await startCopy([next], "cuda:0", { into: previous }).get();
  assert.equal(result, previous);
  const [back] = await startCopy([out], "cpu", { after: work }).get();
  const read = bytesOf(back);
  const after = bytesOf(previous[0]);
  await work.done();
  disposeAll([previous, out, back]);
  module.dispose();
  return { read, old, next, after };
}

Deno.test({
  ...gpu,
  name:
    "into: the copy waits on the GPU for a kernel still reading the result; without that it races",
  async fn() {
    const ordered = await kernelReadsWhileCopyIntoQueued();
    assert.deepEqual(ordered.read, ordered.old, "the kernel read the result's old bytes");
    assert.deepEqual(ordered.after, ordered.next, "then the copy wrote the new ones");
    // The sanitizer's tools run kernels one at a time: no race to show there.
    if (underSanitizer) return;
    intoOrdering.afterHolders = false;
    try {
      const racing = await kernelReadsWhileCopyIntoQueued();
      assert.deepEqual(racing.read, racing.next, "unordered, the kernel read the new bytes");
    } finally {
      intoOrdering.afterHolders = true;
    }
  },
});

Deno.test({
  ...gpu,
  name:
    "into: a copy still reading the result reads its old bytes; after: stream orders after your own work",
  async fn() {
    const bytes = 32 * 1024;
    const old = randomArray(Uint8Array, bytes, 61);
    const previous = await startCopy([old, new Float32Array(2)], "cuda:0").get();
    testAids!.delayStream(0, HOLD_US);
    const back = startCopy(previous, "cpu"); // queued behind the delay, holding the result
    const into = startCopy([randomArray(Uint8Array, bytes, 62), new Float32Array(2)], "cuda:0", {
      into: previous,
    });
    const [oldBack] = await back.get();
    assert.deepEqual(bytesOf(oldBack), old);
    await into.get();
    disposeAll(await back.get());

    using stream = createStream("cuda:0");
    const [readInto] = await startCopy([new Uint8Array(bytes)], "cuda:0").get();
    const current = bytesOf(previous[0]);
    testAids!.delayOn(stream, HOLD_US);
    testAids!.copyOn(stream, { dst: ptrAddress(readInto), src: ptrAddress(previous[0]), bytes });
    const latest = randomArray(Uint8Array, bytes, 63);
    await startCopy([latest, new Float32Array(2)], "cuda:0", { into: previous, after: stream })
      .get();
    await stream.synchronize();
    assert.deepEqual(bytesOf(readInto), current);
    assert.deepEqual(bytesOf(previous[0]), latest);
    disposeAll([previous, readInto]);
  },
});

Deno.test({
  ...gpu,
  name:
    "into: a copy that fails before writing a tensor puts the values it passed through back (all or none)",
  async fn() {
    const result = await startCopy(
      { x: new Float32Array([1, 2]), meta: "old", y: new Float32Array([3, 4]) },
      "cuda:0",
    ).get() as Record<string, unknown>;
    const buffer = new ArrayBuffer(8, { maxByteLength: 64 });
    const x = new Float32Array(buffer).fill(5); // tracks the buffer's length
    // A setter of the result's: it runs when the copy writes the value it
    // passes through, after the data was checked, and shrinks a leaf, which
    // staging then refuses. The value stayed written.
    let meta: unknown = "old";
    Object.defineProperty(result, "meta", {
      get: () => meta,
      set: (value) => {
        meta = value;
        buffer.resize(4);
      },
      enumerable: true,
    });
    await assert.rejects(
      startCopy({ x, meta: "new", y: new Float32Array([7, 8]) }, "cuda:0", { into: result })
        .get(),
      /Cannot copy a tensor of 8 bytes whose buffer was detached or resized during the copy/,
    );
    assert.equal(result.meta, "old");
    const back = await startCopy([result.x, result.y], "cpu").get();
    assert.deepEqual(back.map((tensor) => [...(tensor as Tensor).toTypedArray()]), [[1, 2], [
      3,
      4,
    ]]);
    disposeAll([result, back]);
  },
});

Deno.test({
  ...gpu,
  name:
    "a copy into a result packs arena tensors of a block it cannot send from the arena bit for bit",
  async fn() {
    using arena = hostArena(1 << 16);
    // One block of the result; the new data has an int32 tensor in an
    // arena and an int64 leaf in ordinary memory: the block's leaves are
    // packed, the arena tensor's bytes too (a wrong class once turned its 1s into 1.0f).
    const result = await startCopy({ a: new Int32Array(4), b: new BigInt64Array(2) }, "cuda:0")
      .get();
    const a = arena.int32(4).fill(1);
    const b = new BigInt64Array([-(2n ** 63n), 7n]);
    for (let round = 0; round < 3; round++) {
      await startCopy({ a: Tensor.from(a), b }, "cuda:0", { into: result }).get();
      assert.deepEqual(bytesOf(result.a), new Uint8Array(a.buffer, a.byteOffset, 16));
      assert.deepEqual(bytesOf(result.b), new Uint8Array(b.buffer));
    }
    disposeAll(result);
  },
});

Deno.test({
  ...gpu,
  name:
    "into: a setter of the result that disposes the arena the data lies in fails the copy, reading nothing of it",
  async fn() {
    // With and without an empty leaf first in the group (a detached empty
    // view has the length it had: 0).
    for (const empty of [true, false]) await arenaDisposedBySetter(empty);
  },
});

async function arenaDisposedBySetter(empty: boolean): Promise<void> {
  {
    const arena = hostArena(1 << 16);
    const make = (seed: number) => ({
      ...(empty ? { e: Tensor.from(arena.int32(0)) } : {}),
      x: Tensor.from(arena.float32(4).fill(seed)),
      meta: `step ${seed}`,
      y: Tensor.from(arena.float32(4).fill(seed + 1)),
    });
    const first = make(1);
    const result = await startCopy(first, "cuda:0").get() as Record<string, unknown>;
    // The same batch again: one DMA from the arena (its leaves lie as the result's).
    await startCopy(first, "cuda:0", { into: result }).get();
    let meta: unknown = result.meta;
    Object.defineProperty(result, "meta", {
      get: () => meta,
      set: (value) => {
        meta = value;
        arena.dispose(); // after the data was read: its views now empty
      },
      enumerable: true,
    });
    await assert.rejects(
      startCopy(first, "cuda:0", { into: result }).get(),
      /whose buffer was detached or resized during the copy/,
    );
    const back = await startCopy([result.x, result.y], "cpu").get();
    assert.deepEqual(back.map((tensor) => [...(tensor as Tensor).toTypedArray()]), [
      [1, 1, 1, 1],
      [2, 2, 2, 2],
    ]);
    disposeAll([result, back]);
  }
}

Deno.test({
  ...gpu,
  name:
    "into: a getter of the data that starts another copy into the same result is refused (they would share its columns)",
  async fn() {
    const result = await startCopy({ a: new Float32Array(2), b: new Float32Array(2) }, "cuda:0")
      .get();
    let inner: unknown = "not run";
    const data = {
      a: new Float32Array([1, 2]),
      get b() {
        try {
          startCopy({ a: new Float32Array([9, 9]), b: new Float32Array([9, 9]) }, "cuda:0", {
            into: result,
          });
          inner = undefined;
        } catch (error) {
          inner = error;
        }
        return new Float32Array([3, 4]);
      },
    };
    await startCopy(data, "cuda:0", { into: result }).get();
    assert.ok(inner instanceof Error && /still writing/.test(inner.message), String(inner));
    const back = await startCopy([result.a, result.b], "cpu").get();
    assert.deepEqual(back.map((tensor) => [...tensor.toTypedArray()]), [[1, 2], [3, 4]]);
    disposeAll([result, back]);
  },
});
