import { TensorLayout } from "../../src/tensor_layout.ts";
import assert from "node:assert/strict";
import { BlockPool } from "../../src/memory/block_pool.ts";
import { effectiveAlignment, packCandidates, planPacking } from "../../src/pack_plan.ts";
import { resolveOptions, type StartCopyOptions } from "../../src/options.ts";
import { Route } from "../../src/route.ts";
import { walk } from "../../src/walk/walk.ts";
import {
  CHUNK_BASE_ALIGNMENT,
  GATHER_ENTRY_BYTES,
  GATHER_ENTRY_DOUBLES,
  placeChunks,
} from "../../src/transfer/chunks.ts";

/** A pool whose blocks start `skew` bytes past a multiple of 4096. */
function pool(skew = 0): { pool: BlockPool; blocks: number } {
  let next = 1 << 24;
  const counted = { pool: undefined as unknown as BlockPool, blocks: 0 };
  counted.pool = new BlockPool({
    alloc(bytes) {
      counted.blocks++;
      const address = next + skew;
      next += Math.ceil((bytes + skew) / 4096) * 4096 + 4096;
      return address;
    },
    free() {},
  });
  return counted;
}

function routed(options?: StartCopyOptions): Route {
  const route = new Route(0, resolveOptions(options));
  walk([new Float32Array(3), new Uint8Array(5), new Float64Array(2)], route);
  return route;
}

/** The fields of `struct mtc_gather_entry` in native/gather_entry.h, in order: type and name. */
function gatherEntryFields(): { type: string; name: string }[] {
  const header = Deno.readTextFileSync(new URL("../../native/gather_entry.h", import.meta.url));
  const body = header.replace(/\/\/.*$/gm, "").match(/struct\s+mtc_gather_entry\s*\{([^}]*)\}/);
  assert.ok(body, "native/gather_entry.h defines struct mtc_gather_entry");
  return body[1].split(";").map((field) => field.trim()).filter((field) => field !== "").map(
    (field) => {
      const parts = field.match(/^(.+?)\s+(\w+)$/);
      assert.ok(parts, `a field of one declarator: ${field}`);
      return { type: parts[1], name: parts[2] };
    },
  );
}

Deno.test("the gather-table layout matches native/gather_entry.h: source, offset in the chunk, bytes, each a double", () => {
  const fields = gatherEntryFields();
  // The order chunks.ts writes an entry in: `entries[at]`, `[at + 1]`, `[at + 2]`.
  assert.deepEqual(fields.map((field) => field.name), ["src", "dst_offset", "bytes"]);
  for (const { type, name } of fields) assert.equal(type, "double", `field ${name}`);
  assert.equal(GATHER_ENTRY_DOUBLES, fields.length);
  // Doubles only: no padding between or after them.
  assert.equal(GATHER_ENTRY_BYTES, fields.length * 8);
});

Deno.test("placeChunks() uses the walk's plan on a block with the chunk base alignment", () => {
  const { pool: blocks } = pool();
  const route = routed();
  const [chunk, ...rest] = placeChunks(route, {
    indices: route.h2d.view(),
    pool: blocks,
    packer: route.packer,
  });
  assert.equal(rest.length, 0);
  assert.equal(chunk.block.address % CHUNK_BASE_ALIGNMENT, 0);
  assert.deepEqual(Array.from(chunk.plan.members), [0, 1, 2]);
  assert.deepEqual(Array.from(chunk.plan.offsets), [0, 16, 32]);
  assert.equal(chunk.plan.end, 48);
  route.releaseLists();
});

Deno.test("placeChunks() plans again when the block breaks the walk's alignment, and still aligns every member's address", () => {
  const { pool: blocks } = pool(8);
  const route = routed();
  const chunks = placeChunks(route, {
    indices: route.h2d.view(),
    pool: blocks,
    packer: route.packer,
  });
  const members = chunks.flatMap((c) => Array.from(c.plan.members));
  assert.deepEqual(members.sort(), [0, 1, 2]);
  for (const { plan } of chunks) {
    for (const offset of Array.from(plan.offsets)) {
      assert.equal((plan.base + offset) % 16, 0, `address ${plan.base + offset}`);
    }
  }
  // The rejected block went back to the pool; only the chunks' blocks are in use.
  assert.equal(blocks.stats().inUseBytes, chunks.reduce((n, c) => n + c.block.size, 0));
  route.releaseLists();
});

Deno.test("placeChunks() without the walk's plan (an alignment that needs buckets) runs the general planner", () => {
  const { pool: blocks } = pool();
  const route = routed({ minPackedAlignmentBytes: 6 });
  assert.equal(route.packer!.valid, false);
  const chunks = placeChunks(route, {
    indices: route.h2d.view(),
    pool: blocks,
    packer: route.packer,
  });
  // Each member at a multiple of effectiveAlignment(6, its element size): 8, 6 and 8.
  const elementSizes = [4, 1, 8];
  for (const { plan } of chunks) {
    Array.from(plan.members).forEach((member, m) => {
      const align = effectiveAlignment(6, elementSizes[member]);
      assert.equal((plan.base + plan.offsets[m]) % align, 0, `member ${member}`);
    });
  }
  route.releaseLists();
});

Deno.test("placeChunks() gives the blocks it took back when a later chunk's allocation fails", () => {
  let allocations = 0;
  const failing = new BlockPool({
    alloc(bytes) {
      if (++allocations === 2) throw new Error("out of memory");
      return (1 << 24) * allocations + bytes * 0;
    },
    free() {},
  }, { maxCachedBytes: 0 });
  const route = new Route(0, resolveOptions({ maxPackedChunkBytes: 64 }));
  walk(Array.from({ length: 8 }, () => new Float32Array(8)), route); // 32 bytes each: 4 chunks
  assert.throws(
    () => placeChunks(route, { indices: route.h2d.view(), pool: failing, packer: route.packer }),
    /out of memory/,
  );
  assert.equal(failing.stats().inUseBytes, 0);
  route.releaseLists();
});

Deno.test("placeChunks() gives the walk's chunk its block, so the outputs created bound need no binding", async () => {
  const { Storage } = await import("../../src/memory/storage.ts");
  const { bindChunks } = await import("../../src/transfer/chunks.ts");
  const { pool: blocks } = pool();
  const route = new Route(0, resolveOptions(undefined), () => Storage.pending(blocks));
  const outputs = walk([new Float32Array(3), new Uint8Array(5)], route) as {
    ptr: Deno.PointerValue;
  }[];
  const chunks = placeChunks(route, {
    indices: route.h2d.view(),
    pool: blocks,
    packer: route.packer,
  });
  assert.equal(chunks.length, 1);
  assert.equal(chunks[0].bound, true);
  assert.equal(route.chunkStorage!.block, chunks[0].block);
  bindChunks(route, chunks, { indices: route.h2d.view(), pool: blocks }); // binds nothing
  const at = (i: number) => Number(Deno.UnsafePointer.value(outputs[i].ptr));
  assert.deepEqual([at(0), at(1)], [chunks[0].block.address, chunks[0].block.address + 16]);
  route.releaseLists();
});

Deno.test("placeChunks() leaves the walk's chunk pending when it plans again, and the outputs are bound afresh", async () => {
  const { Storage } = await import("../../src/memory/storage.ts");
  const { bindChunks } = await import("../../src/transfer/chunks.ts");
  const { pool: blocks } = pool(8);
  const route = new Route(0, resolveOptions(undefined), () => Storage.pending(blocks));
  const outputs = walk([new Float32Array(3), new Uint8Array(5)], route) as {
    ptr: Deno.PointerValue;
  }[];
  const chunks = placeChunks(route, {
    indices: route.h2d.view(),
    pool: blocks,
    packer: route.packer,
  });
  assert.ok(chunks.every((chunk) => !chunk.bound));
  assert.equal(route.chunkStorage!.released, true, "never attached");
  bindChunks(route, chunks, { indices: route.h2d.view(), pool: blocks });
  const first = chunks[0];
  assert.equal(
    Number(Deno.UnsafePointer.value(outputs[first.plan.members[0]].ptr)),
    first.plan.base + first.plan.offsets[0],
  );
  route.releaseLists();
});

Deno.test("placeChunks() for the leaves of another device leaves the route's pending CPU chunk alone (mixed copies to a device)", async () => {
  const { Storage } = await import("../../src/memory/storage.ts");
  const { tensorInternals } = await import("../../src/tensor.ts");
  const { pool: blocks } = pool();
  // Stand-ins for two small tensors on cuda:0 (placing reads their outputs' sizes only).
  const fromDevice0 = () =>
    [0, 1].map(() => {
      const tensor = tensorInternals.create(new TensorLayout("float32", Object.freeze([4]), 16, 0));
      tensorInternals.bind(tensor, Storage.pending(blocks), 0);
      return tensor;
    });
  for (
    const [name, cpuLeaves, cpuChunks] of [
      ["two small CPU leaves (their chunk attached first)", [
        new Float32Array(4),
        new Float32Array(4),
      ], 1],
      ["one small CPU leaf (no CPU chunk)", [new Float32Array(4), new Float32Array(100_000)], 0],
    ] as const
  ) {
    const route = new Route(1, resolveOptions(undefined), () => Storage.pending(blocks));
    walk([...cpuLeaves, ...fromDevice0()], route);
    const cpu = placeChunks(route, {
      indices: route.h2d.view(),
      pool: blocks,
      packer: route.packer,
    });
    assert.equal(cpu.length, cpuChunks, name);
    const pending = route.chunkStorage!;
    const holds = pending.holds;
    // As deviceToDevice places them: no packer of the walk's.
    const peer = placeChunks(route, { indices: route.peer, pool: blocks });
    assert.equal(peer.length, 1, name);
    assert.equal(
      peer[0].bound,
      undefined,
      `${name}: the peer chunk's outputs are bound to a storage of their own`,
    );
    assert.equal(route.chunkStorage, pending, name);
    assert.equal(
      pending.holds,
      holds,
      `${name}: the CPU chunk's storage took no block or hold of the peer chunk`,
    );
    route.releaseLists();
  }
});

Deno.test("placeChunks() with no plan from the walk plans the given leaves in order now: the general planner's layout, for any subset (differential)", () => {
  // A copy to the CPU plans at the transfer only the leaves its runs leave
  // (device_to_host.ts): the plan made then must be the general planner's.
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const classes = [Float32Array, Uint8Array, Float64Array, Int16Array, BigInt64Array];
  for (let trial = 0; trial < 300; trial++) {
    const options = {
      maxPackedChunkBytes: rand() < 0.3 ? 64 + Math.floor(rand() * 512) : undefined,
      // The alignments a sequential plan applies to (others always take
      // the general planner: the test above).
      minPackedAlignmentBytes: [8, 16, 64, 256][Math.floor(rand() * 4)],
    };
    const route = new Route(0, resolveOptions(options));
    const leaves = Array.from({ length: Math.floor(rand() * 12) }, () => {
      const cls = classes[Math.floor(rand() * classes.length)];
      const large = rand() < 0.05 ? 300 * 1024 : 0;
      return new cls(Math.floor(rand() * 40) + large / cls.BYTES_PER_ELEMENT);
    });
    walk(leaves, route);
    const indices = Array.from(route.h2d.view()).filter(() => rand() < 0.7);
    const { pool: blocks } = pool();
    const chunks = placeChunks(route, { indices, pool: blocks });
    const bytes = indices.map((i) => route.outputs[i].byteLength);
    const elementSizes = indices.map((i) => leaves[i].BYTES_PER_ELEMENT);
    let next = 0;
    const expected = planPacking(
      { bytes, elementSizes },
      packCandidates(bytes, route.options),
      route.options,
      (_, capacity) => (next += Math.ceil(capacity / 4096) * 4096 + 4096),
    );
    const where = `trial ${trial}: ${JSON.stringify({ options, bytes })}`;
    assert.equal(chunks.length, expected.length, where);
    chunks.forEach(({ plan }, c) => {
      const want = expected[c];
      assert.deepEqual(Array.from(plan.members), Array.from(want.members), where);
      // Both bases are multiples of 4096: the same offsets from them.
      assert.deepEqual(Array.from(plan.offsets), Array.from(want.offsets), where);
      assert.equal(plan.end - plan.start, want.end - want.start, where);
    });
    route.releaseLists();
  }
});
