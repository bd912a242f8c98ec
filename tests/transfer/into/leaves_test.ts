import { TensorLayout } from "../../../src/tensor_layout.ts";
import assert from "node:assert/strict";
import { Tensor } from "../../../mod.ts";
import { registerArena, unregisterArena } from "../../../src/arena_index.ts";
import { readCounts, readData } from "../../../src/transfer/into/leaves.ts";
import { sameLeavesCounts } from "../../../src/transfer/into/known.ts";
import { buildRecord, DIRECT, PACK } from "../../../src/transfer/into/record.ts";
import { arrayCodeOf } from "../../../src/array_code.ts";
import { Storage } from "../../../src/memory/storage.ts";
import { tensorInternals } from "../../../src/tensor.ts";
import { vectorShape } from "../../../src/vector_shape.ts";
import { addressPool, CUDA0, fittingData, madeResult } from "./_result.ts";

// Each leaf of the data is checked against the tensor it replaces, its bytes
// recorded; a group is one DMA from an arena only where all its leaves lie
// in one arena as the result's tensors lie in their block.

Deno.test("readData records each fitting leaf's bytes and the values passed through", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const data = fittingData();
  assert.equal(readData(record, data, result), 1);
  assert.equal(record.views[0], data.boxes.toTypedArray());
  assert.equal(record.views[1], data.ids);
  assert.equal(record.views[2], data.big);
  assert.deepEqual(record.columns.passValues.slice(0, 1), ["b"]);
  assert.deepEqual([...record.groupState], [PACK, PACK]); // no arena
});

Deno.test("readData refuses a leaf of another dtype, shape, device or state, naming its path", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const detached = new Uint8Array(100);
  structuredClone(detached.buffer, { transfer: [detached.buffer] });
  const disposed = Tensor.from(new Float32Array(8), [2, 4]);
  disposed.dispose();
  const cases: [Record<string, unknown>, ErrorConstructor | TypeErrorConstructor, string][] = [
    [
      { boxes: Tensor.from(new Float32Array(8), [4, 2]) },
      TypeError,
      "Invalid option into: expected a float32 tensor of shape [2, 4] (or a TypedArray of that dtype and length) at $.boxes, got a float32 tensor of shape [4, 2] on cpu",
    ],
    [
      { ids: new BigUint64Array(3) },
      TypeError,
      "Invalid option into: expected a int64 tensor of shape [3] (or a TypedArray of that dtype and length) at $.ids, got a BigUint64Array of 3 elements",
    ],
    [
      { big: new Uint8Array(99) },
      TypeError,
      "Invalid option into: expected a uint8 tensor of shape [100] (or a TypedArray of that dtype and length) at $.big, got a Uint8Array of 99 elements",
    ],
    [
      { big: new DataView(new ArrayBuffer(100)) },
      TypeError,
      "Invalid option into: expected a uint8 tensor of shape [100] (or a TypedArray of that dtype and length) at $.big, got (DataView)",
    ],
    [{ big: detached }, TypeError, "Cannot copy a detached or shrunk ArrayBuffer at $.big"],
    [{ boxes: disposed }, Error, "Cannot copy a disposed tensor at $.boxes"],
    [
      { boxes: result.boxes },
      TypeError,
      "Invalid option into: expected CPU data at $.boxes (a copy into a result reads TypedArrays and CPU tensors), got a float32 tensor of shape [2, 4] on cuda:0",
    ],
  ];
  for (const [change, cls, message] of cases) {
    assert.throws(
      () => readData(record, { ...fittingData(), ...change }, result),
      (error: unknown) =>
        error instanceof cls && (cls !== Error || !(error instanceof TypeError)) &&
        (error as Error).message === message,
      message,
    );
  }
});

Deno.test("readData: a group whose leaves lie in one arena at their places goes as one DMA from it", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const buffer = new ArrayBuffer(1024);
  const arena = { address: 1 << 30, hold() {}, release() {} };
  registerArena(buffer, arena);
  try {
    // boxes at 0 and ids at 64 in the chunk: in the arena at 256 and 320.
    const data = {
      ...fittingData(),
      boxes: Tensor.from(new Float32Array(buffer, 256, 8), [2, 4]),
      ids: new BigInt64Array(buffer, 320, 3),
    };
    readData(record, data, result);
    assert.deepEqual([...record.groupState], [DIRECT, PACK]);
    assert.equal(record.groupArena[0], arena);
    assert.equal(record.groupDelta[0], 256);
    // ids 8 bytes further along than boxes' distance: packed instead.
    data.ids = new BigInt64Array(buffer, 328, 3);
    readData(record, data, result);
    assert.deepEqual([...record.groupState], [PACK, PACK]);
  } finally {
    unregisterArena(buffer);
  }
});

Deno.test("readData records the class code of every leaf it reads, arena tensors of a packed group included", () => {
  // One block, two tensors: an int32 tensor over an arena, and a leaf in
  // ordinary memory: the group is packed, the arena tensor too, through a
  // view of its own class (a wrong code converted its numbers: 1 → 1.0f).
  const pool = addressPool();
  const chunk = new Storage(pool, pool.acquire(256), 2);
  const a = tensorInternals.createBound(
    new TensorLayout("int32", vectorShape(4), 16, CUDA0),
    chunk,
    0,
  );
  const b = tensorInternals.createBound(
    new TensorLayout("int64", vectorShape(2), 16, CUDA0),
    chunk,
    16,
  );
  const result = { a, b };
  const record = buildRecord(result, CUDA0);
  const buffer = new ArrayBuffer(1024);
  registerArena(buffer, { address: 1 << 30, hold() {}, release() {} });
  try {
    // Twice, the leaves' classes changing places with a previous copy's.
    const rounds = [
      { a: Tensor.from(new Int32Array(buffer, 64, 4).fill(1)), b: new BigInt64Array(2) },
      { a: new Int32Array(4), b: Tensor.from(new BigInt64Array(buffer, 128, 2).fill(7n)) },
    ];
    for (const data of rounds) {
      readData(record, data, result);
      assert.equal(record.groupState[0], PACK);
      for (const n of [0, 1]) assert.equal(record.codes[n], arrayCodeOf(record.views[n]!));
    }
  } finally {
    unregisterArena(buffer);
  }
});

Deno.test("readData: the same leaves as the last read are not read again, their bytes still checked", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const data = fittingData();
  readData(record, data, result);
  const before = { ...readCounts };
  readData(record, data, result);
  assert.equal(readCounts.same, before.same + 1);
  // A leaf disposed, or detached, since: read in full, and refused.
  data.boxes.dispose();
  assert.throws(() => readData(record, data, result), /disposed tensor at \$\.boxes/);
  data.boxes = Tensor.from(new Float32Array(8), [2, 4]);
  readData(record, data, result);
  const buffer = data.ids.buffer as ArrayBuffer;
  structuredClone(buffer, { transfer: [buffer] });
  assert.throws(() => readData(record, data, result), /detached or shrunk ArrayBuffer at \$\.ids/);
  assert.equal(readCounts.same, before.same + 1);
});

// The differential test of that path: one record kept across rounds (the
// path above, where the leaves repeat) against a record made afresh each
// round (the full read), on the same data, changed between rounds in the
// ways a user can change it.
Deno.test("readData: a kept record reads as a fresh one, round after round of changed data", () => {
  let seed = 20261124;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const pick = <T>(items: T[]): T => items[Math.floor(rand() * items.length)];
  const { result } = madeResult();
  const kept = buildRecord(result, CUDA0);
  const arenaBuffer = new ArrayBuffer(4096);
  const arena = { address: 1 << 30, hold() {}, release() {} };
  registerArena(arenaBuffer, arena);
  const resizable = () => new ArrayBuffer(100, { maxByteLength: 512 });
  // Each leaf's buffer (a disposed tensor no longer gives its own).
  const buffers = new WeakMap<object, ArrayBuffer>();
  const t = (view: Float32Array | BigInt64Array | Uint8Array, shape?: number[]) => {
    const tensor = Tensor.from(view, shape);
    buffers.set(tensor, view.buffer as ArrayBuffer);
    return tensor;
  };
  // Candidates for each leaf: at the places the result has (boxes at 0, ids
  // at 64: the arena's distance 256) and elsewhere; tensors and arrays;
  // length-tracking views of resizable buffers; misfits.
  const boxes = () =>
    pick([
      () => t(new Float32Array(arenaBuffer, 256, 8), [2, 4]),
      () => t(new Float32Array(arenaBuffer, 1024, 8), [2, 4]),
      () => t(new Float32Array(8), [2, 4]),
      () => t(new Float32Array(resizable()).subarray(0, 8), [2, 4]),
      () => t(new Float32Array(8), [4, 2]),
      () => new Float32Array(8),
    ])();
  const ids = () =>
    pick([
      () => new BigInt64Array(arenaBuffer, 320, 3),
      () => new BigInt64Array(arenaBuffer, 328, 3),
      () => new BigInt64Array(3),
      () => t(new BigInt64Array(arenaBuffer, 320, 3)),
      () => new BigUint64Array(3),
    ])();
  const big = () =>
    pick([
      () => new Uint8Array(100),
      () => new Uint8Array(resizable()),
      () => t(new Uint8Array(resizable())),
      () => new Uint8Array(arenaBuffer, 2048, 100),
      () => new Uint8Array(99),
    ])();
  const data: Record<string, unknown> = { boxes: boxes(), ids: ids(), big: big(), name: "b" };
  const bufferOf = (leaf: unknown) =>
    buffers.get(leaf as object) ?? (leaf as Uint8Array).buffer as ArrayBuffer;
  const viewIds = new WeakMap<object, number>();
  let nextId = 0;
  const identity = (view: object | undefined) => {
    if (view === undefined) return undefined;
    if (!viewIds.has(view)) viewIds.set(view, nextId++);
    return viewIds.get(view);
  };
  const outcome = (record: ReturnType<typeof buildRecord>) => {
    try {
      const passes = readData(record, data, result);
      return {
        passes,
        // The views themselves, not their contents (many are all zeros).
        views: record.views.map(identity),
        codes: [...record.codes],
        state: [...record.groupState],
        // (What a packed group's columns hold is not read.)
        direct: [...record.groupState].map((state, g) =>
          state === DIRECT ? [record.groupArena[g], record.groupDelta[g]] : undefined
        ),
      };
    } catch (error) {
      return { error: `${(error as Error).constructor.name}: ${(error as Error).message}` };
    }
  };
  const start = { ...readCounts };
  const startKnown = { ...sameLeavesCounts };
  try {
    for (let round = 0; round < 3000; round++) {
      const key = pick(["boxes", "ids", "big"]);
      const change = rand();
      if (change < 0.45) {
        // Unchanged: the kept record's leaves repeat.
      } else if (change < 0.75) {
        data[key] = key === "boxes" ? boxes() : key === "ids" ? ids() : big();
      } else if (change < 0.82) {
        const leaf = data[key];
        if (leaf instanceof Tensor) leaf.dispose();
      } else if (change < 0.9) {
        const buffer = bufferOf(data[key]);
        if (buffer !== arenaBuffer && buffer.byteLength > 0) {
          structuredClone(buffer, { transfer: [buffer] });
        }
      } else {
        // Shrunk or grown under a length-tracking view (or a fixed one).
        const buffer = bufferOf(data[key]);
        if (buffer.resizable && !buffer.detached) buffer.resize(pick([8, 64, 99, 100, 101, 400]));
      }
      const fresh = buildRecord(result, CUDA0);
      assert.deepEqual(outcome(kept), outcome(fresh), `round ${round}`);
      if (rand() < 0.05) {
        // A copy of other leaves refused in between (a value passed
        // through is walked): read, and refused, by the generic check
        // after its leaves.
        const other = { boxes: boxes(), ids: ids(), big: big(), name: [1] };
        assert.throws(() => readData(kept, other, result));
      }
    }
  } finally {
    unregisterArena(arenaBuffer);
  }
  // Both paths ran, many times.
  assert.ok(readCounts.same - start.same > 300, `${readCounts.same - start.same} same`);
  assert.ok(readCounts.full - start.full > 3000, `${readCounts.full - start.full} full`);
  // Both ways of checking the known leaves (known.ts).
  const byBuffers = sameLeavesCounts.byBuffers - startKnown.byBuffers;
  const byLeaves = sameLeavesCounts.byLeaves - startKnown.byLeaves;
  assert.ok(byBuffers > 100 && byLeaves > 100, `${byBuffers} by buffers, ${byLeaves} by leaves`);
  // Bounded: one entry per leaf position, whatever the rounds.
  assert.equal(kept.known.leaves.length, 3);
  assert.ok((kept.known.buffers?.length ?? 0) <= 3);
});

Deno.test("readData: a refused read in between sends the next copy of the known leaves through a full read", () => {
  // A read the compiled check refuses runs the generic check, which reads
  // (and records) the leaves before the place it throws at: the record's
  // columns are then the refused data's, not the known leaves'.
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const a = { ...fittingData(), big: new Uint8Array(100).fill(1) };
  readData(record, a, result);
  // A pinned CPU tensor (the pinned pool's memory stood in for by an ArrayBuffer).
  const pool = addressPool();
  const block = pool.acquire(100);
  (block as unknown as { cache: unknown }).cache = {
    buffer: new ArrayBuffer(block.size),
    views: new Map(),
    byCode: [],
    counted: false,
  };
  const pinned = tensorInternals.createBound(
    new TensorLayout("uint8", vectorShape(100), 100, -1),
    new Storage(pool, block, 1),
    0,
  );
  const refused = { ...fittingData(), big: pinned, name: [1] };
  assert.throws(() => readData(record, refused, result), /at \$\.name/);
  const before = { ...readCounts };
  readData(record, a, result);
  assert.equal(readCounts.full, before.full + 1);
  assert.equal(record.views[2], a.big);
  assert.equal(record.ledger.pinned.length, 0);
  // And the next one takes the known leaves again.
  readData(record, a, result);
  assert.equal(readCounts.same, before.same + 1);
});
