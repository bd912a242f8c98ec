/**
 * Packing a large chunk with several threads: the bytes of its members are
 * copied into the pinned staging block by native threads, in parallel.
 *
 * One core of the GPU hosts copies only 3–6 GB/s: packing 1000 × 4 KB into
 * pinned memory took 385 µs on one thread of an H100 lease, four times the
 * chunk's DMA. Below {@linkcode PARALLEL_PACK_MIN_BYTES}, or where fewer
 * than two threads would pack a chunk under 1 MiB ({@linkcode packingThreads}),
 * `TypedArray.prototype.set` packs on the main thread instead.
 *
 * The native copy reads the members through raw addresses, taken here with
 * one fast FFI call each; that is safe because no other JavaScript runs
 * between taking them and the synchronous copy, so nothing can detach,
 * shrink or free a member in between, and the route holds every member.
 *
 * @module
 */

import { copyPieces, viewAddress } from "../../ffi/native.ts";
import { viewByteLength } from "../dtype.ts";
import type { Block } from "../memory/block_pool_types.ts";
import { stagingConcurrency } from "./background.ts";
import { inputChanged, type PackedChunk, type PackedLeaves } from "./pack.ts";

/** Chunks with at least this many payload bytes may be packed by several threads. */
export const PARALLEL_PACK_MIN_BYTES = 256 * 1024;

/** Chunks from this size on are packed by the native copy even on one thread. */
const NATIVE_PACK_MIN_BYTES = 1024 * 1024;

/** Payload bytes per packing thread at least (fewer threads for smaller chunks)... */
const BYTES_PER_THREAD = 32 * 1024;
/** ...and for chunks of tiny members (under {@linkcode TINY_MEMBER_BYTES} on average). */
const BYTES_PER_THREAD_TINY = 256 * 1024;
const TINY_MEMBER_BYTES = 64;

/**
 * The threads that pack a chunk of `payload` bytes in `members` members,
 * the calling one included; 0 where `set` on the main thread packs it (a
 * small chunk, or one under 1 MiB that would get a single thread).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { packingThreads } from "./parallel_pack.ts";
 * assert.equal(packingThreads(1024, 4), 0);
 * assert.ok(packingThreads(4 << 20, 1000) >= 1);
 * ```
 */
export function packingThreads(payload: number, members: number): number {
  if (payload < PARALLEL_PACK_MIN_BYTES) return 0;
  const perThread = payload < TINY_MEMBER_BYTES * members
    ? BYTES_PER_THREAD_TINY
    : BYTES_PER_THREAD;
  const threads = Math.min(stagingConcurrency(), Math.floor(payload / perThread));
  if (threads >= 2) return threads;
  return payload >= NATIVE_PACK_MIN_BYTES ? 1 : 0;
}

let table = new Float64Array(0);

/**
 * Copies the members of `plan` (positions in `h2d`, the route's CPU→CUDA
 * indices) into `stage`, where the chunk's first byte goes to the block's
 * first byte, with `threads` threads (the caller's {@linkcode packingThreads},
 * at least one); marks each member in `packed`.
 *
 * @throws {TypeError} when a member's buffer was detached or shrunk after
 * the walk (a copy admitted late, after user code ran)
 */
export function packInParallel(
  route: PackedLeaves,
  h2d: ArrayLike<number>,
  plan: PackedChunk,
  stage: Block,
  packed: Uint8Array,
  threads: number = Math.max(1, packingThreads(plan.end - plan.start, plan.members.length)),
): void {
  const { members, offsets, start } = plan;
  if (table.length < 3 * members.length) table = new Float64Array(3 * members.length);
  const base = stage.address - start;
  for (let m = 0; m < members.length; m++) {
    const k = members[m];
    const index = h2d[k];
    packed[k] = 1;
    const src = route.hostBytes(index);
    const bytes = route.outputs[index].byteLength;
    const now = viewByteLength(src);
    if (now !== bytes) throw inputChanged(bytes, now);
    const at = 3 * m;
    table[at] = bytes === 0 ? 0 : viewAddress(src);
    table[at + 1] = base + offsets[m];
    table[at + 2] = bytes;
  }
  copyPieces(table, members.length, threads);
}
