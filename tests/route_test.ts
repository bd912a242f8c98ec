import { TensorLayout } from "../src/tensor_layout.ts";
import assert from "node:assert/strict";
import { Tensor } from "../mod.ts";
import { registerArena, unregisterArena } from "../src/arena_index.ts";
import { ARRAY_CLASSES } from "../src/array_code.ts";
import { leafFields, readLeaf } from "../src/leaf_fields.ts";
import { BlockPool } from "../src/memory/block_pool.ts";
import { Storage } from "../src/memory/storage.ts";
import { resolveOptions } from "../src/options.ts";
import { Route } from "../src/route.ts";
import { type PackedStages, type PackedWalk, resetPackedWalks } from "../src/packed_walk.ts";
import type { Block } from "../src/memory/block_pool_types.ts";
import { arrayCodeOf } from "../src/array_code.ts";
import { tensorInternals } from "../src/tensor.ts";
import { vectorShape } from "../src/vector_shape.ts";
import { walk } from "../src/walk/walk.ts";

const CUDA0 = 0;
const CPU = -1;

/** A pool over made-up addresses: binding needs addresses, not memory. */
function addressPool(): BlockPool {
  let next = 1 << 20;
  return new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free() {} });
}

Deno.test("a route to a device sends every CPU leaf host→device, with unbound outputs of the same dtype and shape", () => {
  const route = new Route(CUDA0, resolveOptions(undefined));
  const boxes = Tensor.from(new Float32Array(8), [2, 4]);
  const result = walk({ boxes, ids: new BigInt64Array(3), name: "x" }, route) as Record<
    string,
    unknown
  >;
  assert.equal(route.tensors, 2);
  assert.equal(route.bytes, 32 + 24);
  assert.deepEqual(Array.from(route.h2d.view()), [0, 1]);
  assert.deepEqual([route.peer, Array.from(route.d2h.view())], [[], []]);
  const out = result.boxes as Tensor;
  assert.equal(out.device, "cuda:0");
  assert.equal(out.dtype, "float32");
  assert.deepEqual(out.shape, [2, 4]);
  assert.equal((result.ids as Tensor).dtype, "int64");
  assert.equal(result.name, "x");
  // The walk's plan: both in one chunk, 16-byte aligned, input order.
  assert.deepEqual(Array.from(route.packer!.members), [0, 1]);
  assert.deepEqual([...route.packer!.offsets.view()], [0, 32]);
  route.releaseLists();
});

Deno.test("a route to the CPU wraps CPU leaves without copying and moves nothing", () => {
  const route = new Route(CPU, resolveOptions(undefined));
  const data = new Int16Array([1, 2, 3]);
  const [out] = walk([data], route) as Tensor[];
  route.end();
  assert.equal(route.outputs.length, 0);
  assert.equal(out.device, "cpu");
  assert.equal(out.toTypedArray(), data);
  route.releaseLists();
});

Deno.test("a tensor already on the target is not routed: the result holds a new Tensor over the same host bytes", () => {
  const route = new Route(CPU, resolveOptions(undefined));
  const data = new Uint8Array([1, 2, 3, 4]);
  const tensor = Tensor.from(data, [2, 2]);
  const [out] = walk([tensor], route) as Tensor[];
  assert.notEqual(out, tensor);
  assert.equal(out.toTypedArray(), data);
  assert.deepEqual([out.dtype, out.shape, out.device], ["uint8", [2, 2], "cpu"]);
  assert.equal(route.tensors, 1);
  route.end();
  assert.equal(route.outputs.length, 0);
  out.dispose();
  assert.equal(tensor.disposed, false);
  assert.deepEqual([...tensor.toTypedArray()], [1, 2, 3, 4]);
  route.releaseLists();
});

/** A tensor on `device` bound to `bytes` of a fresh block of `pool` (its one hold). */
function pooledTensor(pool: BlockPool, device: number, bytes: number): Tensor {
  const tensor = tensorInternals.create(
    new TensorLayout("float32", vectorShape(bytes / 4), bytes, device),
  );
  tensorInternals.bind(tensor, new Storage(pool, pool.acquire(bytes), 1), 0);
  return tensor;
}

for (const [name, device] of [["a device tensor", CUDA0], ["a pinned CPU tensor", CPU]] as const) {
  Deno.test(`${name} already on the target gets a new Tensor with its own hold on the storage`, () => {
    for (const inputFirst of [true, false]) {
      const pool = addressPool();
      const input = pooledTensor(pool, device, 64);
      const route = new Route(device, resolveOptions(undefined));
      const [out] = walk([input], route) as Tensor[];
      route.end();
      assert.notEqual(out, input);
      assert.equal(out.device, input.device);
      assert.equal(out.pinned, input.pinned);
      assert.deepEqual(out.ptr, input.ptr);
      assert.equal(route.outputs.length, 0);
      const [first, second] = inputFirst ? [input, out] : [out, input];
      first.dispose();
      // The other still holds the block, at the same address.
      assert.equal(second.disposed, false);
      assert.equal(pool.stats().inUseBytes, pool.stats().reservedBytes);
      assert.ok(second.ptr !== null);
      second.dispose();
      assert.equal(pool.stats().inUseBytes, 0, "both disposed: the block is back");
      route.releaseLists();
    }
  });
}

Deno.test("Route.disposeShared() gives back the holds of the outputs over pooled inputs", () => {
  const pool = addressPool();
  const input = pooledTensor(pool, CUDA0, 64);
  const route = new Route(CUDA0, resolveOptions(undefined));
  const [out] = walk([input], route) as Tensor[];
  route.disposeShared();
  assert.equal(out.disposed, true);
  input.dispose();
  assert.equal(pool.stats().inUseBytes, 0);
  route.releaseLists();
});

Deno.test("Route.bind() points an output at its offset in a storage, which it holds until disposed", () => {
  const pool = addressPool();
  const route = new Route(CUDA0, resolveOptions(undefined));
  const [a, b] = walk([new Float32Array(4), new Float32Array(4)], route) as Tensor[];
  const storage = new Storage(pool, pool.acquire(64), 2);
  route.bind(0, storage, 0);
  route.bind(1, storage, 16);
  assert.equal(
    Number(Deno.UnsafePointer.value(b.ptr)) - Number(Deno.UnsafePointer.value(a.ptr)),
    16,
  );
  a.dispose();
  assert.equal(storage.released, false);
  b.dispose();
  assert.equal(storage.released, true);
  assert.equal(pool.stats().inUseBytes, 0);
  route.releaseLists();
});

Deno.test("without packing the route plans nothing during the walk", () => {
  const route = new Route(CUDA0, resolveOptions({ packCpuTensors: false }));
  walk([new Float32Array(4)], route);
  assert.equal(route.packer, undefined);
  route.releaseLists();
});

Deno.test("a route groups device leaves by their device, in order, and holds each input storage once per run", () => {
  const pool = addressPool();
  const chunk = new Storage(pool, pool.acquire(1024), 3);
  const other = new Storage(pool, pool.acquire(1024), 1);
  // Made-up device tensors (unbound memory is enough for the route).
  const onDevice = (device: number, storage: Storage, offset: number) => {
    const tensor = tensorInternals.create(
      new TensorLayout("float32", Object.freeze([1]), 4, device),
    );
    tensorInternals.bind(tensor, storage, offset);
    return tensor;
  };
  const fromOne = new Route(CPU, resolveOptions(undefined));
  walk([
    onDevice(0, chunk, 0),
    onDevice(0, chunk, 64),
    onDevice(0, other, 0),
    onDevice(0, chunk, 128),
  ], fromOne);
  const bySource = (route: Route) =>
    [...route.d2hBySource()].map(([source, list]) => [source, Array.from(list)]);
  assert.deepEqual(bySource(fromOne), [[0, [0, 1, 2, 3]]]);
  // Planned at the transfer, for the leaves its runs leave (transfer/chunks.ts).
  assert.equal(fromOne.packer, undefined, "a copy to the CPU plans nothing in the walk");
  assert.deepEqual(fromOne.inputStorages(), [chunk, other, chunk]);
  fromOne.releaseLists();

  const fromTwo = new Route(CPU, resolveOptions(undefined));
  walk([onDevice(1, chunk, 0), onDevice(0, chunk, 4), onDevice(1, chunk, 8)], fromTwo);
  assert.deepEqual(bySource(fromTwo), [[1, [0, 2]], [0, [1]]]);
  fromTwo.releaseLists();

  const peers = new Route(2, resolveOptions(undefined));
  walk([
    onDevice(0, chunk, 0),
    onDevice(1, chunk, 4),
    onDevice(0, chunk, 8),
    Tensor.from(new Int8Array(1)),
  ], peers);
  assert.deepEqual([...peers.peerBySource()], [[0, [0, 2]], [1, [1]]]);
  assert.deepEqual(Array.from(peers.h2d.view()), [3]);
  peers.releaseLists();
});

Deno.test("packed CPU→CUDA outputs are created bound to the route's chunk storage at their planned offsets", () => {
  const pool = addressPool();
  const route = new Route(CUDA0, resolveOptions(undefined), () => Storage.pending(pool));
  const [a, b, big] = walk(
    [new Float32Array(3), new BigInt64Array(2), new Uint8Array(300 * 1024)],
    route,
  ) as Tensor[];
  const chunk = route.chunkStorage!;
  assert.deepEqual([...route.packer!.offsets.view()], [0, 16], "the 300 KB leaf is not packed");
  // Attaching the chunk's block gives the packed outputs their memory, unbound ones none.
  const block = pool.acquire(route.packer!.end);
  chunk.attach(block, 2);
  assert.equal(Number(Deno.UnsafePointer.value(a.ptr)), block.address);
  assert.equal(Number(Deno.UnsafePointer.value(b.ptr)), block.address + 16);
  assert.throws(() => big.ptr);
  a.dispose();
  b.dispose();
  assert.equal(chunk.released, true);
  assert.equal(pool.stats().inUseBytes, 0);
  route.releaseLists();
});

Deno.test("a route to the CPU makes no chunk storage", () => {
  const route = new Route(CPU, resolveOptions(undefined), () => {
    throw new Error("not expected");
  });
  walk([new Float32Array(3), new Float32Array(3)], route);
  assert.equal(route.chunkStorage, undefined);
  route.releaseLists();
});

Deno.test("a TypedArray leaf routes as readLeaf reads it and as the tensor that wraps it would (hostile views, both targets)", () => {
  // The route reads a TypedArray from the class code the walk's check
  // found, not through readLeaf: both must agree on every kind of view.
  const resizable = new ArrayBuffer(64, { maxByteLength: 256 });
  const arenaBuffer = new ArrayBuffer(256);
  class Tagged extends Float64Array {
    // @ts-ignore: a tag that lies about the class (the route reads the internal one)
    override get [Symbol.toStringTag]() {
      return "Uint8Array";
    }
  }
  class Renamed extends Int32Array {
    static override get name() {
      return "Float32Array";
    }
  }
  const views: ArrayBufferView[] = [
    ...ARRAY_CLASSES.map((cls) => new cls(new ArrayBuffer(48), 8, 3)),
    new Uint8ClampedArray(5),
    new Tagged(2),
    new Renamed(3),
    new Float32Array(resizable), // tracks its buffer's length
    new Uint16Array(resizable, 2, 7),
    new Float32Array(arenaBuffer, 32, 4),
    new Uint8Array(arenaBuffer, 100, 1),
  ];
  const arena = { address: 4096, hold() {}, release() {} };
  registerArena(arenaBuffer, arena);
  try {
    for (const target of [CUDA0, CPU]) {
      for (const pack of [true, false]) {
        const options = resolveOptions({ packCpuTensors: pack });
        const pool = addressPool();
        const pending = () => Storage.pending(pool);
        const byArrays = new Route(target, options, pending);
        const byTensors = new Route(target, options, pending);
        const outputs = walk(views, byArrays) as Tensor[];
        const tensors = views.map((view) => Tensor.from(view as never));
        const wrapped = walk(tensors, byTensors) as Tensor[];
        const fields = leafFields();
        views.forEach((view, i) => {
          readLeaf(view as never, fields);
          const out = outputs[i];
          const where = `view ${i}, target ${target}, pack ${pack}`;
          assert.deepEqual(
            [out.dtype, out.shape, out.byteLength, out.device],
            [fields.dtype, fields.shape, fields.byteLength, wrapped[i].device],
            where,
          );
          assert.deepEqual([out.dtype, out.shape], [wrapped[i].dtype, wrapped[i].shape], where);
          if (target === CPU) assert.equal(out.toTypedArray().buffer, view.buffer, where);
        });
        for (const key of ["tensors", "bytes", "movedBytes"] as const) {
          assert.equal(byArrays[key], byTensors[key], key);
        }
        assert.deepEqual(Array.from(byArrays.h2d.view()), Array.from(byTensors.h2d.view()));
        assert.deepEqual([...byArrays.codes.view()], [...byTensors.codes.view()]);
        assert.deepEqual(
          Array.from(byArrays.fromArena.view()),
          Array.from(byTensors.fromArena.view()),
        );
        assert.deepEqual([...byArrays.arenaOffsets.view()], [...byTensors.arenaOffsets.view()]);
        assert.deepEqual(byArrays.arenas, byTensors.arenas);
        assert.deepEqual(byArrays.hostData, byTensors.hostData.map((_, i) => views[i]));
        if (pack && target !== CPU) {
          assert.deepEqual([...byArrays.packer!.offsets.view()], [
            ...byTensors.packer!.offsets.view(),
          ]);
          // The route's codes are the classes readLeaf reads (packing picks its views by them).
          const codes = [...byArrays.codes.view()];
          const expected = Array.from(byArrays.h2d.view()).map((i) => {
            readLeaf(views[i] as never, fields);
            return fields.code;
          });
          assert.deepEqual(codes, expected);
        }
        byArrays.releaseLists();
        byTensors.releaseLists();
      }
    }
  } finally {
    unregisterArena(arenaBuffer);
  }
});

Deno.test("Route.releaseLists() returns the route's lists to the pool once, however often it is called", async () => {
  const { borrowList } = await import("../src/number_list.ts");
  const route = new Route(CUDA0, resolveOptions(undefined));
  walk([new Float32Array(4), new Uint8Array(3)], route);
  route.releaseLists();
  route.releaseLists();
  // Every list lent now is a list of its own, never one lent twice.
  const lent = Array.from({ length: 8 }, () => borrowList());
  assert.equal(new Set(lent).size, lent.length);
});

Deno.test("a TypedArray leaf whose size properties lie (own properties, a subclass's getters) is routed at the engine's size", () => {
  class Liar extends Uint8Array {
    override get byteLength(): number {
      return 8 << 20;
    }
    override get length(): number {
      return 8 << 20;
    }
  }
  const own = new Uint8Array(16);
  Object.defineProperty(own, "byteLength", { value: 4096 });
  Object.defineProperty(own, "length", { value: 4096 });
  for (
    const route of [
      new Route(CUDA0, resolveOptions(undefined)),
      new Route(CPU, resolveOptions(undefined)),
    ]
  ) {
    const outputs = walk([own, new Liar(16)], route) as Tensor[];
    for (const output of outputs) {
      assert.equal(output.byteLength, 16);
      assert.deepEqual(output.shape, [16]);
    }
    assert.equal(route.bytes, 32);
    route.releaseLists();
  }
});

Deno.test("a route's leaf and host-data arrays are lent: cleared when its lists go back, then lent to the next route", () => {
  const inputs = [new Float32Array(4), Tensor.from(new Int32Array(2)), new Uint8Array(3)];
  const first = new Route(CUDA0, resolveOptions(undefined));
  walk(inputs, first);
  first.end();
  const { leaves, hostData } = first;
  assert.equal(leaves[0], inputs[0]);
  first.releaseLists();
  // Nothing of the finished copy stays reachable through the spare arrays.
  assert.ok(leaves.every((leaf) => leaf === undefined));
  assert.ok(hostData.every((data) => data === undefined));
  const second = new Route(CUDA0, resolveOptions(undefined));
  const spare: unknown[][] = [leaves, hostData];
  assert.ok(spare.includes(second.leaves), "a spare array is lent");
  const other = [new Float64Array(1)];
  const [out] = walk(other, second) as Tensor[];
  second.end();
  assert.equal(second.leaves[0], other[0]);
  assert.equal(second.leaves[1], undefined);
  assert.deepEqual([second.outputs.length, out.dtype], [1, "float64"]);
  second.releaseLists();
  // Released twice: lent once (the guard), not to two routes at once.
  second.releaseLists();
  const a = new Route(CUDA0, resolveOptions(undefined));
  const b = new Route(CUDA0, resolveOptions(undefined));
  assert.notEqual(a.leaves, b.leaves);
  assert.notEqual(a.hostData, b.hostData);
  assert.notEqual(a.leaves as unknown, b.hostData);
  a.releaseLists();
  b.releaseLists();
});

/** Blocks of ordinary memory standing in for pinned ones (no pool, no FFI). */
function ordinaryStages(): PackedStages {
  const memory = new Map<Block, ArrayBuffer>();
  return {
    acquire(bytes) {
      const block = { address: 0, size: bytes } as Block;
      memory.set(block, new ArrayBuffer(bytes));
      return block;
    },
    release() {},
    view: (block, cls) => new cls(memory.get(block)!),
    viewsByCode: () => [],
    pinnedPending: () => Storage.pending(addressPool()),
  };
}

Deno.test("a route whose walk packed every leaf lends its arrays back with the leaves cleared; one whose walk handed over clears the host data too", () => {
  resetPackedWalks();
  for (const handOver of [false, true]) {
    const pool = addressPool();
    const route = new Route(
      CUDA0,
      resolveOptions(undefined),
      () => Storage.pending(pool),
      ordinaryStages(),
    );
    const packed = route.packedWalk as PackedWalk;
    assert.ok(packed.begin({})); // as a compiled plan starts its walk
    const inputs = [new Float32Array(4), new Uint8Array(3)];
    // As a compiled plan offers leaves to the walk; a leaf the route gets
    // through `add` turns the walk off, and the route takes over.
    for (const leaf of inputs) packed.array(leaf, arrayCodeOf(leaf));
    if (handOver) route.add(new Int16Array(2), new Int16Array(2), arrayCodeOf(new Int16Array(2)));
    route.end();
    assert.equal(route.packedChunk !== undefined, !handOver);
    const { leaves, hostData } = route;
    assert.equal(leaves[0], inputs[0]);
    assert.equal(hostData[0], handOver ? inputs[0] : undefined);
    route.releaseLists();
    assert.ok(leaves.every((leaf) => leaf === undefined));
    assert.ok(hostData.every((data) => data === undefined));
  }
  resetPackedWalks();
});
