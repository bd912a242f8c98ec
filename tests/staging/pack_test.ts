import assert from "node:assert/strict";
import { viewAddress } from "../../ffi/native.ts";
import { Tensor } from "../../mod.ts";
import type { Block } from "../../src/memory/block_pool_types.ts";
import { resolveOptions } from "../../src/options.ts";
import { Route } from "../../src/route.ts";
import { arrayCodeOf, NO_CODE } from "../../src/array_code.ts";
import {
  packBySet,
  type PackedChunk,
  packView,
  pageableChunk,
  StageWriter,
} from "../../src/staging/pack.ts";
import { walk } from "../../src/walk/walk.ts";

// What pack.ts decides: each member's bytes land unchanged at its offset less
// the chunk's start (in the pinned block, or in the pageable buffer without
// one), through a view of the member's own class; members whose bytes the
// walk did not read (tensor leaves) are read then; a single view goes in at
// any byte offset. Staging blocks here are ordinary memory seen through an
// address, as pinned memory is.

const FILL = 0xee;

/** A float32 NaN with a payload, a float64 signalling NaN, -0 and an int64 extreme: bits that a conversion would change. */
function leaves() {
  const nan32 = new Float32Array(new Uint32Array([0x7fa00001, 0xffc12345]).buffer);
  const nan64 = new Float64Array(
    new BigUint64Array([0x7ff0000000000001n, 0x8000000000000000n]).buffer,
  );
  return [
    nan32,
    new Uint8Array([1, 2, 3]),
    nan64,
    new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n]),
    Tensor.from(new Int16Array([-1, 7, 300])), // read through hostBytes: the walk keeps no class code for it
    new Uint8ClampedArray([255, 0]),
  ];
}

function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** The leaves walked into a route to cuda:0 without a pending storage (no chunk is placed). */
function routed(data: unknown[]) {
  const route = new Route(0, resolveOptions(undefined));
  walk(data, route);
  return { route, h2d: route.h2d.view() };
}

/** Every member at a multiple of 16 from `start` on, with 16 bytes between neighbours. */
function planOf(data: ArrayBufferView[], start: number): PackedChunk {
  const members: number[] = [];
  const offsets: number[] = [];
  let at = start;
  data.forEach((leaf, k) => {
    members.push(k);
    offsets.push(at);
    at = Math.ceil((at + leaf.byteLength + 16) / 16) * 16;
  });
  return { members, offsets, start, end: at };
}

function expected(plan: PackedChunk, data: ArrayBufferView[]): Uint8Array {
  const out = new Uint8Array(plan.end - plan.start).fill(FILL);
  Array.from(plan.members).forEach((k, m) =>
    out.set(bytesOf(data[k]), plan.offsets[m] - plan.start)
  );
  return out;
}

function block(bytes: Uint8Array): Block {
  return { address: viewAddress(bytes), size: bytes.byteLength };
}

const asViews = (data: unknown[]) =>
  data.map((leaf) => leaf instanceof Tensor ? leaf.toTypedArray() : leaf as ArrayBufferView);

Deno.test("packBySet puts each member's bytes unchanged at its offset less the chunk's start, in a pinned block", () => {
  const data = leaves();
  const { route, h2d } = routed(data);
  const plan = planOf(asViews(data), 96);
  const stage = new Uint8Array(plan.end - plan.start).fill(FILL);
  const packed = new Uint8Array(data.length);
  packBySet(route, h2d, plan, block(stage), packed);
  assert.deepEqual(stage, expected(plan, asViews(data)));
  assert.deepEqual([...packed], data.map(() => 1));
  (data[4] as Tensor).dispose();
});

Deno.test("packBySet without a staging block packs into the pageable buffer that pageableChunk gives", () => {
  const data = leaves();
  const { route, h2d } = routed(data);
  const plan = planOf(asViews(data), 0);
  pageableChunk(plan.end).fill(FILL);
  packBySet(route, h2d, plan, undefined, new Uint8Array(data.length));
  assert.deepEqual(pageableChunk(plan.end).slice(), expected(plan, asViews(data)));
  (data[4] as Tensor).dispose();
});

Deno.test("packBySet packs only the plan's members and marks only them", () => {
  const data = leaves();
  const { route, h2d } = routed(data);
  const views = asViews(data);
  const all = planOf(views, 0);
  const plan: PackedChunk = {
    members: [1, 3],
    offsets: [all.offsets[1], all.offsets[3]],
    start: all.offsets[1],
    end: all.offsets[3] + views[3].byteLength,
  };
  const stage = new Uint8Array(plan.end - plan.start).fill(FILL);
  const packed = new Uint8Array(data.length);
  packBySet(route, h2d, plan, block(stage), packed);
  assert.deepEqual([...packed], [0, 1, 0, 1, 0, 0]);
  assert.deepEqual(stage, expected(plan, views));
  (data[4] as Tensor).dispose();
});

Deno.test("packBySet refuses a member whose view grew or shrank after the walk (a resizable buffer), with nothing packed past it", () => {
  for (const [what, newBytes] of [["shrank", 4], ["grew", 64]] as const) {
    const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
    const tracking = new Uint8Array(buffer); // tracks the buffer's length
    const data = [new Float32Array([1, 2]), tracking, new Uint8Array([9, 9])];
    const { route, h2d } = routed(data);
    const plan = planOf(data, 0);
    buffer.resize(newBytes);
    const stage = new Uint8Array(plan.end + 64).fill(FILL);
    assert.throws(
      () => packBySet(route, h2d, plan, block(stage), new Uint8Array(data.length)),
      (error: Error) =>
        error instanceof TypeError &&
        error.message.includes(
          `Cannot copy a tensor of 16 bytes whose buffer was detached or resized during the copy (now ${newBytes} bytes)`,
        ),
      what,
    );
    assert.ok(
      stage.subarray(plan.offsets[1]).every((byte) => byte === FILL),
      `${what}: nothing packed from it on`,
    );
  }
});

Deno.test("pageableChunk grows to the largest chunk asked for and keeps its bytes between calls of no larger size", () => {
  const first = pageableChunk(100);
  first.fill(5);
  assert.equal(pageableChunk(64)[63], 5);
  const grown = pageableChunk(1 << 20);
  assert.equal(grown.byteLength, 1 << 20);
});

Deno.test("packView puts a view in at an offset of its element size through its class, and at any other offset byte for byte", () => {
  const stage = new Uint8Array(64).fill(FILL);
  const nan = new Float64Array(new BigUint64Array([0x7ff0000000000001n]).buffer);
  packView(block(stage), 8, nan);
  packView(block(stage), 19, new Float32Array([1.5, -0]));
  packView(block(stage), 40, new Uint8ClampedArray([9]));
  const want = new Uint8Array(64).fill(FILL);
  want.set(bytesOf(nan), 8);
  want.set(bytesOf(new Float32Array([1.5, -0])), 19);
  want.set([9], 40);
  assert.deepEqual(stage, want);
});

Deno.test("StageWriter writes what packView writes: every class, offsets of the element size or not, views of other buffers", () => {
  const viaWriter = new Uint8Array(4096).fill(FILL);
  const viaPackView = new Uint8Array(4096).fill(FILL);
  const writer = new StageWriter(block(viaWriter));
  const sources: ArrayBufferView[] = [
    ...leaves().filter((x) => !(x instanceof Tensor)) as ArrayBufferView[],
    new Uint16Array([1, 2, 3]),
  ];
  const wide = new Uint8Array(64).map((_, i) => i * 7);
  sources.push(new Int32Array(wide.buffer, 8, 3), new Float64Array(wide.buffer, 16, 2));
  let at = 0;
  for (let round = 0; round < 12; round++) {
    for (const src of sources) {
      const view = src as never;
      writer.write(at, view, arrayCodeOf(view));
      packView(block(viaPackView), at, view);
      at += src.byteLength + (round % 5); // aligned in some rounds, not in others
    }
  }
  // A class code the writer has no view for goes byte by byte.
  const bytes = new Uint8Array([4, 5, 6]);
  writer.write(at, bytes, NO_CODE);
  packView(block(viaPackView), at, bytes);
  assert.deepEqual(viaWriter, viaPackView);
  assert.notEqual(viaWriter[0], FILL);
});
