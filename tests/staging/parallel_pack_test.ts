import assert from "node:assert/strict";
import { viewAddress } from "../../ffi/native.ts";
import { deviceCount, disposeAll, startCopy } from "../../mod.ts";
import type { Block } from "../../src/memory/block_pool_types.ts";
import { pinnedPool, pinnedView } from "../../src/memory/pinned_memory.ts";
import { resolveOptions } from "../../src/options.ts";
import type { ChunkPlan } from "../../src/pack_plan.ts";
import { Route } from "../../src/route.ts";
import { stagingConcurrency } from "../../src/staging/background.ts";
import {
  packingThreads,
  packInParallel,
  PARALLEL_PACK_MIN_BYTES,
} from "../../src/staging/parallel_pack.ts";
import { walk } from "../../src/walk/walk.ts";
import { bytesOf, hasGpu, randomArray } from "../gpu/_helpers.ts";

// What parallel_pack.ts decides: where each member's bytes go in the staging
// block (its offset less the chunk's start), that a member changed after the
// walk stops the pack before any byte is copied, and how many threads copy
// (one per 256 KiB of payload, at most stagingConcurrency()). The staging
// block is ordinary memory on the CPU (pinned memory is ordinary memory to
// the copying threads); the GPU tests below pack into pinned memory.

const FILL = 0xee;

/** Random leaves of varied classes and sizes (1 in 16 empty), walked to cuda:0. */
function routed(count: number, seed: number) {
  const classes = [Uint8Array, Int16Array, Float32Array, Float64Array, BigInt64Array] as const;
  const leaves = Array.from({ length: count }, (_, i) => {
    const cls = classes[i % classes.length];
    const length = i % 16 === 7 ? 0 : 1 + ((i * 7919 + seed) % 2048);
    return randomArray(cls as typeof Uint8Array, length, seed + i) as ArrayBufferView;
  });
  const route = new Route(0, resolveOptions(undefined));
  walk(leaves, route);
  return { route, leaves, h2d: route.h2d.view() };
}

/** A plan of `members` laid out from `start` on, each at a multiple of 16, with `gap` bytes between. */
function planOf(leaves: ArrayBufferView[], members: number[], start: number, gap = 16): ChunkPlan {
  const offsets: number[] = [];
  let at = start;
  for (const k of members) {
    offsets.push(at);
    at = Math.ceil((at + leaves[k].byteLength + gap) / 16) * 16;
  }
  return { members, offsets, base: 1 << 20, start, end: at };
}

/** A staging block over ordinary memory, filled with FILL, for `plan`'s payload. */
function stageFor(plan: ChunkPlan): { bytes: Uint8Array; block: Block } {
  const bytes = new Uint8Array(plan.end - plan.start).fill(FILL);
  return { bytes, block: { address: viewAddress(bytes), size: bytes.length } };
}

function bytesOfView(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** Asserts that each member of `plan` lies at its offset less the start, and FILL everywhere else. */
function assertPacked(stage: Uint8Array, plan: ChunkPlan, leaves: ArrayBufferView[]): void {
  const expected = new Uint8Array(stage.length).fill(FILL);
  Array.from(plan.members).forEach((k, m) => {
    expected.set(bytesOfView(leaves[k]), plan.offsets[m] - plan.start);
  });
  for (let at = 0; at < stage.length; at++) {
    if (stage[at] !== expected[at]) {
      assert.fail(`byte ${at} of the stage holds ${stage[at]}, expected ${expected[at]}`);
    }
  }
}

/** Asserts that no byte of `stage` was written (a byte-wise diff of a large array takes minutes). */
function assertUntouched(stage: Uint8Array, what: string): void {
  const at = stage.findIndex((byte) => byte !== FILL);
  assert.equal(at, -1, `${what}: byte ${at} was written`);
}

Deno.test("packInParallel lands each member bit-exact at its offset less the chunk's start, and writes nothing else", () => {
  const { route, leaves, h2d } = routed(600, 1);
  const members = leaves.map((_, k) => k);
  const plan = planOf(leaves, members, 96);
  assert.ok(plan.end - plan.start >= PARALLEL_PACK_MIN_BYTES, "a chunk large enough to pack so");
  const { bytes, block } = stageFor(plan);
  packInParallel(route, h2d, plan, block, new Uint8Array(leaves.length));
  assertPacked(bytes, plan, leaves);
  route.releaseLists();
});

Deno.test("packInParallel marks in `packed` the members it packs, and no other leaf", () => {
  const { route, leaves, h2d } = routed(40, 2);
  // Every third leaf, in reverse: members are positions in h2d, in any order.
  const members = leaves.map((_, k) => k).filter((k) => k % 3 === 1).reverse();
  const plan = planOf(leaves, members, 0);
  const { bytes, block } = stageFor(plan);
  const packed = new Uint8Array(leaves.length);
  packInParallel(route, h2d, plan, block, packed);
  assert.deepEqual(Array.from(packed), leaves.map((_, k) => k % 3 === 1 ? 1 : 0));
  assertPacked(bytes, plan, leaves);
  route.releaseLists();
});

Deno.test("packInParallel refuses a member detached after the walk with a TypeError, before copying any byte", () => {
  const { route, leaves, h2d } = routed(20, 3);
  const members = leaves.map((_, k) => k);
  const plan = planOf(leaves, members, 32);
  const { bytes, block } = stageFor(plan);
  const detached = leaves[9];
  (detached.buffer as ArrayBuffer).transfer();
  assert.throws(
    () => packInParallel(route, h2d, plan, block, new Uint8Array(leaves.length)),
    (error: Error) =>
      error instanceof TypeError &&
      error.message ===
        `Cannot copy a tensor of ${
          route.outputs[9].byteLength
        } bytes whose buffer was detached or resized during the copy (now 0 bytes): inputs must not change until get() resolves`,
  );
  assertUntouched(bytes, "the members before it, checked already, were not copied either");
  route.releaseLists();
});

Deno.test("packInParallel refuses a member whose resizable buffer shrank after the walk, saying how many bytes it now views", () => {
  const buffer = new ArrayBuffer(4096, { maxByteLength: 8192 });
  const shrinking = new Float32Array(buffer); // tracks the buffer's length
  const leaves = [new Uint8Array(100).fill(1), shrinking, new Uint8Array(100).fill(2)];
  const route = new Route(0, resolveOptions(undefined));
  walk(leaves, route);
  buffer.resize(1024);
  const plan = planOf(leaves, [0, 1, 2], 0);
  const { bytes, block } = stageFor(plan);
  assert.throws(
    () => packInParallel(route, route.h2d.view(), plan, block, new Uint8Array(3)),
    /^TypeError: Cannot copy a tensor of 4096 bytes whose buffer was detached or resized during the copy \(now 1024 bytes\)/,
  );
  assertUntouched(bytes, "the members beside it were not copied");
  route.releaseLists();
});

Deno.test("packInParallel after a pack of more members copies only the new chunk's members (the address table is reused)", () => {
  const many = routed(300, 4);
  const first = planOf(many.leaves, many.leaves.map((_, k) => k), 0);
  const large = stageFor(first);
  packInParallel(many.route, many.h2d, first, large.block, new Uint8Array(300));
  assertPacked(large.bytes, first, many.leaves);
  large.bytes.fill(FILL); // a later copy's stale entries would write here again

  const few = routed(3, 5);
  const second = planOf(few.leaves, [0, 1, 2], 48);
  const small = stageFor(second);
  packInParallel(few.route, few.h2d, second, small.block, new Uint8Array(3));
  assertPacked(small.bytes, second, few.leaves);
  assertUntouched(large.bytes, "the earlier, larger chunk's stage");
  many.route.releaseLists();
  few.route.releaseLists();
});

/** Helper threads started by the packs of 256-member chunks of `payloads` bytes, in a fresh process. */
async function helpersAfter(payloads: number[], stagingThreads: number): Promise<number[]> {
  const child = new URL("./_parallel_pack_threads.ts", import.meta.url).pathname;
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-check", "-A", child, ...payloads.map(String)],
    env: { MTC_STAGING_THREADS: String(stagingThreads) },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  return JSON.parse(new TextDecoder().decode(stdout));
}

Deno.test({
  name:
    "packInParallel copies with one thread per 32 KiB of payload, the calling one included (needs Linux)",
  ignore: Deno.build.os !== "linux",
  async fn() {
    // 128 KiB (below PARALLEL_PACK_MIN_BYTES): the caller alone; 320 KiB:
    // ten threads (nine helpers); 4 MiB: sixteen (fifteen helpers). Helpers
    // stay for later packs.
    assert.deepEqual(await helpersAfter([128 << 10, 320 << 10, 4 << 20], 16), [0, 9, 15]);
  },
});

Deno.test("packingThreads: set below 256 KiB and for one thread under 1 MiB; one thread per 32 KiB, per 256 KiB for members under 64 bytes", () => {
  const threads = stagingConcurrency();
  // Below PARALLEL_PACK_MIN_BYTES, `set` packs (0), whatever the members.
  assert.equal(packingThreads(PARALLEL_PACK_MIN_BYTES - 1, 10), 0);
  // 600 KiB of 2.4 KB members: one thread per 32 KiB (18), at most stagingConcurrency().
  const normal = Math.min(threads, 18);
  assert.equal(packingThreads(600 << 10, 256), normal >= 2 ? normal : 0);
  // 4 MiB of 16-byte members: one thread per 256 KiB (16).
  const tiny = Math.min(threads, 16);
  assert.equal(packingThreads(4 << 20, (4 << 20) / 16), tiny >= 2 ? tiny : 1);
  // 600 KiB of 16-byte members: two threads at most (one per 256 KiB).
  const tinySmall = Math.min(threads, 2);
  assert.equal(packingThreads(600 << 10, (600 << 10) / 16), tinySmall >= 2 ? tinySmall : 0);
});

Deno.test({
  name: "packInParallel copies with at most stagingConcurrency() threads (needs Linux)",
  ignore: Deno.build.os !== "linux",
  async fn() {
    // 4 MiB would take sixteen threads; MTC_STAGING_THREADS=3 allows three.
    assert.deepEqual(await helpersAfter([4 << 20], 3), [2]);
  },
});

Deno.test({
  name: "packInParallel lands each member bit-exact at its offset in a pinned staging block",
  ignore: deviceCount() === 0,
  fn() {
    const { route, leaves, h2d } = routed(600, 6);
    const plan = planOf(leaves, leaves.map((_, k) => k), 208);
    const block = pinnedPool.acquire(plan.end - plan.start);
    try {
      const pinned = pinnedView(block, Uint8Array) as Uint8Array;
      const stage = pinned.subarray(0, plan.end - plan.start);
      stage.fill(FILL);
      packInParallel(route, h2d, plan, block, new Uint8Array(leaves.length));
      assertPacked(stage, plan, leaves);
    } finally {
      pinnedPool.release(block);
      route.releaseLists();
    }
  },
});

Deno.test({
  name: "a chunk packed by several threads reaches cuda:0 bit-exact, in one DMA",
  ignore: !hasGpu,
  async fn() {
    // 400 × 4 KiB: 1.6 MB of payload, over PARALLEL_PACK_MIN_BYTES.
    const input = Array.from({ length: 400 }, (_, i) => randomArray(Float32Array, 1024, 70 + i));
    const handle = startCopy(input, "cuda:0");
    const out = await handle.get();
    assert.deepEqual(
      { chunks: handle.stats().chunks, packedTensors: handle.stats().packedTensors },
      { chunks: 1, packedTensors: 400 },
    );
    out.forEach((tensor, i) => assert.deepEqual(bytesOf(tensor), bytesOf(input[i]), `leaf ${i}`));
    disposeAll(out);
  },
});
