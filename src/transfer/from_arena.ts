/**
 * CPU → CUDA for tensors that lie in a host arena: no staging, no packing
 * copy. The leaves of each arena are sorted by offset and cut into runs of
 * neighbours (gaps up to {@linkcode MAX_RUN_GAP} bytes, each output at an
 * offset that keeps its packed alignment, none overlapping); each run is one
 * device block and one DMA from the arena's pinned memory. The copy holds
 * the arena until it settles, so the arena cannot be reset or freed while
 * the DMA reads it.
 *
 * @module
 */

import { copyAsync } from "../../ffi/native.ts";
import type { ArenaMemory } from "../arena_index.ts";
import { elementSizeOf } from "../dtype.ts";
import { devicePool } from "../memory/device_memory.ts";
import { firstPositions } from "../number_list.ts";
import { Storage } from "../memory/storage.ts";
import { effectiveAlignment, SequentialPacker } from "../pack_plan.ts";
import type { Route } from "../route.ts";
import type { Submission } from "./submission.ts";

/** Bytes of unrelated arena data a run may carry along rather than split. */
export const MAX_RUN_GAP = 4096;

/** Queues every arena leaf of `route`. */
export function arenaToDevice(route: Route, submission: Submission): void {
  submission.involve(route.target);
  const { arenas, arenaStarts } = route;
  const fromArena = route.fromArena.view();
  const arenaOffsets = route.arenaOffsets.view();
  if (arenas.length === 1) {
    // A batch built in one arena: the walk's lists as they are.
    submission.holdArena(arenas[0]);
    sendRuns(route, submission, arenas[0], fromArena, arenaOffsets);
    return;
  }
  const groups = new Map<ArenaMemory, { indices: number[]; offsets: number[] }>();
  for (let j = 0; j < arenas.length; j++) {
    const arena = arenas[j];
    let group = groups.get(arena);
    if (!group) {
      groups.set(arena, group = { indices: [], offsets: [] });
      submission.holdArena(arena);
    }
    const end = j + 1 < arenas.length ? arenaStarts[j + 1] : fromArena.length;
    for (let k = arenaStarts[j]; k < end; k++) {
      group.indices.push(fromArena[k]);
      group.offsets.push(arenaOffsets[k]);
    }
  }
  for (const [arena, { indices, offsets }] of groups) {
    sendRuns(route, submission, arena, indices, Float64Array.from(offsets));
  }
}

/** Sends the leaves `indices` of `arena` (at byte `offsets` in it) in runs of neighbours. */
function sendRuns(
  route: Route,
  submission: Submission,
  arena: ArenaMemory,
  indices: ArrayLike<number>,
  offsets: Float64Array,
) {
  const { options, outputs } = route;
  const n = indices.length;
  const order = orderByOffset(offsets, n);
  // With a power-of-two alignment of at least 8, every dtype gets exactly
  // it: no per-leaf dtype lookup.
  const { packCpuTensors, maxPackedChunkBytes, minPackedAlignmentBytes } = options;
  const uniform = SequentialPacker.applies(minPackedAlignmentBytes) ? minPackedAlignmentBytes : 0;
  const run: Run = { arena, indices, offsets, order, from: 0, to: 0, start: 0, end: 0 };
  for (let o = 0; o < n; o++) {
    const k = order[o];
    const offset = offsets[k];
    const output = outputs[indices[k]];
    const bytes = output.byteLength;
    const align = uniform ||
      effectiveAlignment(minPackedAlignmentBytes, elementSizeOf(output.dtype));
    // The uniform alignment is a power of two: a bit mask where the offset
    // fits 31 bits (a remainder of doubles calls into C, per leaf).
    const within = offset - run.start;
    const aligned = uniform !== 0 && within < 2 ** 31
      ? (within & (uniform - 1)) === 0
      : within % align === 0;
    const joins = packCpuTensors && o > run.from && offset >= run.end &&
      offset - run.end <= MAX_RUN_GAP && aligned &&
      offset + bytes - run.start <= maxPackedChunkBytes;
    if (!joins) {
      if (o > run.from) sendRun(route, submission, run);
      run.from = o;
      run.start = run.end = offset;
    }
    run.to = o + 1;
    if (offset + bytes > run.end) run.end = offset + bytes;
  }
  if (n > run.from) sendRun(route, submission, run);
}

// The last order sorted, reused while it still sorts the offsets.
let lastOrder: ArrayLike<number> = firstPositions(0);

/**
 * Positions 0..n-1 ordered by `offsets` (stable). A producer that fills the
 * arena in the walk's order needs no sort; one that fills it in another
 * order, the same one every batch (a training loop's producer, lengths
 * changing, the arena reset between batches), gets the last copy's order
 * back after one pass that checks it; anything else is sorted by
 * {@linkcode byOffset}.
 */
export function orderByOffset(offsets: Float64Array, n: number): ArrayLike<number> {
  if (sortsStably(offsets, n, firstPositions(n))) return firstPositions(n);
  if (lastOrder.length === n && sortsStably(offsets, n, lastOrder)) return lastOrder;
  return lastOrder = byOffset(offsets, n);
}

/** Whether `order` (a permutation of 0..n-1) orders `offsets`, ties by position. */
function sortsStably(offsets: Float64Array, n: number, order: ArrayLike<number>): boolean {
  for (let o = 1; o < n; o++) {
    const a = offsets[order[o - 1]], b = offsets[order[o]];
    if (b < a || (b === a && order[o] < order[o - 1])) return false;
  }
  return true;
}

/**
 * Positions 0..n-1 ordered by `offsets` (stable). A producer that fills the
 * arena a little out of the walk's order (a sample's ids before its boxes)
 * leaves few inversions, which an insertion sort undoes in linear time; past
 * a budget of moves, offset and position are packed into one double (exact
 * below 2^52) and sorted natively, or by a comparator for huge arenas.
 */
export function byOffset(offsets: Float64Array, n: number): ArrayLike<number> {
  const order = new Uint32Array(n);
  for (let k = 0; k < n; k++) order[k] = k;
  let moves = 0;
  const budget = 8 * n + 64;
  for (let i = 1; i < n; i++) {
    const position = order[i];
    const offset = offsets[position];
    let j = i - 1;
    while (j >= 0 && offsets[order[j]] > offset) {
      order[j + 1] = order[j];
      j--;
      if (++moves > budget) return sortedByPacking(offsets, n);
    }
    order[j + 1] = position;
  }
  return order;
}

const POSITION_BITS = 2 ** 20;

function sortedByPacking(offsets: Float64Array, n: number): ArrayLike<number> {
  let largest = 0;
  for (let k = 0; k < n; k++) if (offsets[k] > largest) largest = offsets[k];
  if (n >= POSITION_BITS || largest >= 2 ** 32) {
    return Array.from({ length: n }, (_, k) => k).sort((a, b) => offsets[a] - offsets[b]);
  }
  const keys = new Float64Array(n);
  for (let k = 0; k < n; k++) keys[k] = offsets[k] * POSITION_BITS + k;
  keys.sort();
  const order = new Uint32Array(n);
  for (let k = 0; k < n; k++) order[k] = keys[k] % POSITION_BITS;
  return order;
}

interface Run {
  arena: ArenaMemory;
  /** Route indices of the arena's leaves, their offsets, and their order by offset. */
  indices: ArrayLike<number>;
  offsets: Float64Array;
  order: ArrayLike<number>;
  /** The run is `order[from..to)`. */
  from: number;
  to: number;
  /** Its byte range in the arena. */
  start: number;
  end: number;
}

/**
 * The alignment a run's first byte needs on the device so that every
 * output keeps its packed alignment: the runs align their members relative
 * to their start, and a block's address is a multiple of every power of
 * two up to 256 (as a rule), not of 6, 24 or 512 (`minPackedAlignmentBytes`
 * may be any integer). The least common multiple of the alignments of
 * every element size.
 */
function runBaseAlignment(minAlignment: number): number {
  let base = 1;
  for (const size of [1, 2, 4, 8]) {
    const align = effectiveAlignment(minAlignment, size);
    base = base / gcd(base, align) * align;
  }
  return base;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

function sendRun(route: Route, submission: Submission, run: Run): void {
  const { target } = route;
  const pool = devicePool(target);
  const { indices, offsets, order, from, to, start } = run;
  const span = run.end - start;
  let block = pool.acquire(span);
  // A run of several leaves starts at an address of its base alignment:
  // where the block's is not, a block with room to shift the run is taken.
  let lead = 0;
  if (to - from > 1) {
    const alignment = runBaseAlignment(route.options.minPackedAlignmentBytes);
    if (block.address % alignment !== 0) {
      pool.release(block);
      block = pool.acquire(span + alignment);
      lead = (alignment - (block.address % alignment)) % alignment;
    }
  }
  // The walk bound every arena leaf at its offset in the arena: one run of
  // them all from the arena's start needs no binding (see `Route.arenaStorage`).
  const pending = route.arenaStorage;
  const bound = pending !== undefined && route.arenas.length === 1 && from === 0 &&
    to === route.fromArena.length && start === 0 && lead === 0;
  const storage = bound ? pending : new Storage(pool, block, to - from);
  if (bound) pending.attach(block, to - from);
  // Outputs are bound after the DMA is queued, in `finally`:
  // Note [Bind outputs after the transfer, in finally] in chunks.ts.
  try {
    if (span > 0) {
      copyAsync({
        device: target,
        dst: block.address + lead,
        src: run.arena.address + start,
        bytes: span,
      });
      submission.stats.copies++;
    }
  } finally {
    for (let o = from; !bound && o < to; o++) {
      route.bind(indices[order[o]], storage, lead + offsets[order[o]] - start);
    }
  }
  if (to - from > 1) {
    submission.stats.chunks++;
    submission.stats.packedTensors += to - from;
  }
}
