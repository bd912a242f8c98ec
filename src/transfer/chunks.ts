/**
 * Chunk placement: packed chunks on pool blocks, and the gather of CUDA
 * tensors into them.
 *
 * A chunk is planned by the sequential packer (one chunk in input order),
 * during the walk for CPU→CUDA leaves or here for the leaves of the other
 * directions, or else here by the general planner; it is then placed
 * on a block of the pool its bytes will live in (device memory for CPU→CUDA
 * and CUDA→other CUDA, pinned memory for CUDA→CPU).
 *
 * @module
 */

import { elementSizeOf } from "../dtype.ts";
import type { BlockPool } from "../memory/block_pool.ts";
import type { Block } from "../memory/block_pool_types.ts";
import { devicePool } from "../memory/device_memory.ts";
import { pinnedView } from "../memory/pinned_memory.ts";
import { Storage } from "../memory/storage.ts";
import { type ChunkPlan, packCandidates, planPacking, SequentialPacker } from "../pack_plan.ts";
import type { Route } from "../route.ts";
import type { Submission } from "./submission.ts";

/** Doubles per gather-table entry: source address, offset in the chunk, bytes (native/gather_entry.h). */
export const GATHER_ENTRY_DOUBLES = 3;

/** Bytes per gather-table entry. */
export const GATHER_ENTRY_BYTES = GATHER_ENTRY_DOUBLES * Float64Array.BYTES_PER_ELEMENT;

/**
 * The base alignment the walk's plan assumes of a chunk's block; a block
 * that does not have it sends the leaves to the general planner, which
 * aligns against the real address.
 */
export const CHUNK_BASE_ALIGNMENT = 256;

/** A packed chunk with the pool block it lives in. */
export interface PlacedChunk {
  /** Members (positions in the list that was planned), offsets, payload range. */
  plan: ChunkPlan;
  /** The block at `plan.base`. */
  block: Block;
  /** Whether its outputs are bound already (created bound by the walk: see `Route.chunkStorage`). */
  bound?: boolean;
}

/** What to place: positions `indices` of the route, on blocks of `pool`. */
export interface Placement {
  /** Route indices of the leaves to pack, in order. */
  indices: ArrayLike<number>;
  /** The pool the chunks' bytes live in. */
  pool: BlockPool;
  /** The walk's plan for exactly these leaves, when it made one. */
  packer?: SequentialPacker;
}

/**
 * The packed chunks for the leaves at `indices`, on blocks of `pool`: the
 * walk's plan when it holds (without one, a sequential plan made now when
 * it can be), else the general planner's.
 */
export function placeChunks(route: Route, { indices, pool, packer }: Placement): PlacedChunk[] {
  const blocks: Block[] = [];
  try {
    // The pending storage is the walk's CPU chunk's: only its own plan may
    // take it (a chunk from another device, planned now, in a copy to a
    // device that also packs CPU leaves, once took it: attaching a second
    // block threw, or its outputs were never bound).
    const pending = packer !== undefined && packer === route.packer
      ? route.chunkStorage
      : undefined;
    let plans = sequentialChunk(packer ?? planNow(route, indices), pool, blocks, pending);
    if (plans && pending !== undefined) {
      return plans.map((plan) => ({ plan, block: blocks[0], bound: true }));
    }
    if (!plans) {
      const bytes: number[] = [];
      const elements: number[] = [];
      for (let k = 0; k < indices.length; k++) {
        const output = route.outputs[indices[k]];
        bytes.push(output.byteLength);
        elements.push(elementSizeOf(output.dtype));
      }
      plans = planPacking(
        { bytes, elementSizes: elements },
        packCandidates(bytes, route.options),
        route.options,
        (_, capacity) => {
          const block = pool.acquire(capacity);
          blocks.push(block);
          return block.address;
        },
      );
    }
    return plans.map((plan, c) => ({ plan, block: blocks[c] }));
  } catch (error) {
    // A failed allocation of a later chunk gives the earlier ones back.
    for (const block of blocks) pool.release(block);
    throw error;
  }
}

/**
 * The sequential plan of the leaves at `indices`, made now, for leaves the
 * walk made none for (a copy to the CPU plans only the leaves its runs
 * leave: planning every leaf in the walk cost the common copy back, all
 * runs, 10 % of its time), or undefined where it cannot apply. The route
 * owns it (its lists live as long as the route's).
 */
function planNow(route: Route, indices: ArrayLike<number>): SequentialPacker | undefined {
  if (!SequentialPacker.applies(route.options.minPackedAlignmentBytes)) return undefined;
  const packer = route.adoptPacker(new SequentialPacker(route.options));
  const outputs = route.outputs;
  for (let k = 0; k < indices.length && packer.valid; k++) {
    packer.add(k, outputs[indices[k]].byteLength);
  }
  return packer;
}

/**
 * The one chunk the walk (or `planNow`) planned, on a block of `pool`, or undefined when the
 * general planner must run (no plan, or a block whose address does not keep
 * the plan's alignment); no chunk when fewer than two leaves would share it.
 */
function sequentialChunk(
  packer: SequentialPacker | undefined,
  pool: BlockPool,
  blocks: Block[],
  pending: Storage | undefined,
): ChunkPlan[] | undefined {
  if (!packer?.valid) return undefined;
  const members = packer.members;
  if (members.length < 2) return [];
  const block = pool.acquire(packer.end);
  if (block.address % CHUNK_BASE_ALIGNMENT !== 0) {
    pool.release(block);
    return undefined;
  }
  blocks.push(block);
  // Outputs the walk bound to the pending storage get its block now.
  if (pending !== undefined) pending.attach(block, members.length);
  return [{
    members,
    offsets: packer.offsets.view(),
    base: block.address,
    start: 0,
    end: packer.end,
  }];
}

/**
 * The pending storage (see `Storage.pending`) of a CPU→CUDA route's packed
 * chunk on device `target`: for `Route`, which takes no pool itself.
 */
export function pendingChunkStorage(target: number): Storage {
  return Storage.pending(devicePool(target));
}

// Note [Bind outputs after the transfer, in finally]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A packed chunk's block becomes its outputs' memory when it is bound (one
// `Storage` per chunk, held by its members). Every path that sends chunks
// (CPU→CUDA in host_to_device.ts, arena runs in from_arena.ts, gathered
// CUDA chunks in gatherChunks below) binds:
// - after queueing the chunks' transfers, so that binding (a JS loop over
//   the members) overlaps the DMA instead of delaying it;
// - in a `finally`, so that after a failure the outputs own the blocks and
//   their disposal (Submission.abort) gives the blocks back. Binding after
//   the DMA without `finally` leaked the chunk when staging failed, under
//   injected faults.

/**
 * Gives every chunk's block to its outputs (one `Storage` per chunk, held
 * by its members); when and where callers call it: Note [Bind outputs
 * after the transfer, in finally].
 */
export function bindChunks(
  route: Route,
  chunks: readonly PlacedChunk[],
  { indices, pool, made }: {
    indices: ArrayLike<number>;
    pool: BlockPool;
    /** Called with each storage made (see `ChunkGather.holdOutputs`). */
    made?: (storage: Storage) => void;
  },
): void {
  for (const { plan, block, bound } of chunks) {
    if (bound) continue;
    const storage = new Storage(pool, block, plan.members.length);
    made?.(storage);
    for (let m = 0; m < plan.members.length; m++) {
      route.bind(indices[plan.members[m]], storage, plan.offsets[m]);
    }
  }
}

/** A packed chunk gathered on its source device, ready to be sent. */
export interface GatheredChunk {
  /** Address of the gather table (pinned, mapped). */
  table: number;
  /** Its entries. */
  count: number;
  /** The packed scratch buffer on the source device. */
  scratch: number;
  /** Where the chunk's payload goes. */
  dst: number;
  /** Payload bytes. */
  payload: number;
}

/** What to gather: CUDA leaves of one device into chunks, and how to send each. */
export interface ChunkGather {
  /** The device the leaves live on. */
  source: number;
  /** Their route indices. */
  list: ArrayLike<number>;
  /** The placed chunks of `list` (positions in `list`). */
  chunks: PlacedChunk[];
  /** The pool the chunks' blocks belong to. */
  chunkPool: BlockPool;
  /**
   * Whether the copy holds each chunk's storage until it settles (pinned
   * outputs: Note [Submission lifetime] in submission.ts).
   */
  holdOutputs?: boolean;
  /** Queues the gather kernel and the send of one chunk. */
  send: (chunk: GatheredChunk) => void;
}

/**
 * Writes each chunk's gather table, binds its outputs, and lets `send` queue
 * the kernel and the transfer. Returns which positions of `list` were packed.
 */
export function gatherChunks(
  route: Route,
  submission: Submission,
  { source, list, chunks, chunkPool, send, holdOutputs }: ChunkGather,
): Uint8Array {
  const packed = new Uint8Array(list.length);
  const scratchPool = devicePool(source);
  // Outputs are bound after the sends are queued, in `finally`:
  // Note [Bind outputs after the transfer, in finally] (above).
  try {
    for (const { plan } of chunks) {
      const { members, offsets, base, start, end } = plan;
      const payload = end - start;
      const tableBlock = submission.takeStaging(members.length * GATHER_ENTRY_BYTES);
      const entries = pinnedView(tableBlock, Float64Array);
      for (let m = 0; m < members.length; m++) {
        const i = list[members[m]];
        const at = GATHER_ENTRY_DOUBLES * m;
        packed[members[m]] = 1;
        entries[at] = route.sourceAddress(i);
        entries[at + 1] = offsets[m] - start;
        entries[at + 2] = route.outputs[i].byteLength;
      }
      const scratch = scratchPool.acquire(payload);
      try {
        send({
          table: tableBlock.address,
          count: members.length,
          scratch: scratch.address,
          dst: base + start,
          payload,
        });
      } finally {
        // Later users of the scratch block queue behind the send on the
        // source's stream (after a failure, behind the drain).
        scratchPool.release(scratch);
      }
      submission.stats.packedTensors += members.length;
      submission.stats.chunks++;
    }
  } finally {
    bindChunks(route, chunks, {
      indices: list,
      pool: chunkPool,
      made: holdOutputs ? (storage) => submission.holdOutput(storage) : undefined,
    });
  }
  return packed;
}
