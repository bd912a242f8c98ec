/**
 * `startCopy`: walk → plan → stage → submit → outputs, in that order.
 *
 * Everything that can be rejected is checked before any memory is taken or
 * any CUDA call is made (options, device, structure, leaves). Submission
 * then queues all transfers on the library's stream of each device involved
 * and records one event per device; outputs are created while the DMA runs.
 *
 * @module
 */

import {
  copyAsync,
  copyFromBuffer,
  copyPeer,
  eventRecord,
  gather,
  streamSynchronize,
} from "../ffi/native.ts";
import type { Block, BlockPool } from "./memory/block_pool.ts";
import {
  AsyncCopyHandle,
  type CopyJob,
  type CopyStats,
  type DeviceEvent,
  reapFinished,
} from "./copy_handle.ts";
import { CPU, parseDevice } from "./device.ts";
import { devicePool } from "./memory/device_memory.ts";
import {
  type DType,
  dtypeOfArray,
  elementSizeOf,
  type TypedArray,
  type TypedArrayConstructor,
} from "./dtype.ts";
import { acquireEvent, releaseEvent } from "./memory/event_pool.ts";
import { type ResolvedOptions, resolveOptions, type StartCopyOptions } from "./options.ts";
import { type ChunkPlan, packCandidates, planPacking, SequentialPacker } from "./pack_plan.ts";
import { pinnedPool, pinnedView } from "./memory/pinned_memory.ts";
import { borrowList, type NumberList, returnList } from "./number_list.ts";
import { Storage } from "./memory/storage.ts";
import {
  bindTensor,
  createTensor,
  rebindTensor,
  Tensor,
  tensorAddress,
  tensorData,
  tensorDevice,
  tensorStorage,
} from "./tensor.ts";
import { type Leaf, type LeafSink, walk } from "./traverse.ts";
import { splitIntoPieces, stageOnWorkers, type StagingPiece } from "./staging/worker_pool.ts";
import { addressOf } from "../ffi/native.ts";

/**
 * The result type of copying a `T`: every TypedArray or Tensor leaf becomes
 * a `Tensor`; arrays, plain objects and Maps keep their shape.
 */
export type CopyResult<T> = T extends Tensor | TypedArray ? Tensor
  : T extends Map<infer K, infer V> ? Map<K, CopyResult<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: CopyResult<T[I]> }
  : T extends Record<string, unknown> ? { [K in keyof T]: CopyResult<T[K]> }
  : T;

/**
 * Unpacked tensors at least this large are staged by the Worker pool when
 * `useBackgroundThread` is on; smaller ones are staged inline, where a
 * Worker round trip (23–46 µs measured) would cost more than the memcpy.
 */
export const WORKER_MIN_BYTES = 1024 * 1024;

/**
 * Starts copying every tensor in `data` to `device`, asynchronously.
 *
 * Small CPU tensors are packed into pinned chunks and sent with one DMA per
 * chunk; larger ones are staged through pinned memory (in parallel on a
 * Worker pool when large); CUDA tensors going to the CPU are gathered on the
 * device and sent back with one DMA per chunk.
 *
 * Inputs must not be modified until `get()` resolves or `ready()` is true;
 * the handle keeps them alive until then.
 *
 * @param data a TypedArray, a `Tensor`, or arrays, plain objects and Maps of
 * them (other values pass through by reference)
 * @param device `"cpu"`, `"cuda"` or `"cuda:N"`
 * @param options see {@linkcode StartCopyOptions}
 * @returns a handle whose `get()` resolves with the copied structure
 * @throws {TypeError} for a malformed device, bad options, a cyclic
 * structure or a leaf over a detached buffer
 * @throws {RangeError} for `cuda:N` past the device count or an option out
 * of range
 * @throws {Error} for a CUDA target without a usable device, or a disposed
 * tensor leaf
 *
 * @example Copy a batch's meta-data, overlap other work, then consume it
 * ```ts
 * import { deviceCount, startCopy } from "@mtc/core";
 * const batch = [{ boxes: new Float32Array(8), classIds: new BigInt64Array(2) }];
 * const handle = startCopy(batch, deviceCount() > 0 ? "cuda:0" : "cpu");
 * // ... other work runs while the copy is in flight ...
 * const onDevice = await handle.get();
 * console.assert(onDevice[0].boxes.shape[0] === 8);
 * console.assert(handle.stats().tensors === 2);
 * ```
 */
export function startCopy<T>(
  data: T,
  device: string,
  options?: StartCopyOptions,
): AsyncCopyHandle<CopyResult<T>> {
  const resolved = resolveOptions(options);
  const target = parseDevice(device);
  const leaves = new LeafTable(target, resolved);
  const result = walk(data, leaves) as CopyResult<T>;
  reapFinished();
  const job = submit(leaves, resolved);
  return new AsyncCopyHandle<CopyResult<T>>({
    ...job,
    complete: () => {
      job.complete();
      return result;
    },
  });
}

/**
 * The leaves of one copy that need moving, with their output tensors.
 * Outputs are created during the walk, unbound, and bound to their memory
 * once it is planned, so the result structure is final from the start.
 */
export class LeafTable implements LeafSink {
  readonly target: number;
  /** Leaves found, including those that need no copy. */
  tensors = 0;
  /** Their payload bytes. */
  bytes = 0;
  readonly leaves: Leaf[] = [];
  readonly outputs: Tensor[] = [];
  /** Indices of CPU→CUDA, CUDA→other CUDA, and CUDA→CPU leaves. */
  readonly h2d: NumberList = borrowList();
  readonly peer: number[] = [];
  readonly d2h: number[] = [];
  /**
   * The packing plan of the CPU→CUDA leaves, or of the CUDA→CPU leaves when
   * they all come from one device, built during the walk when it can be.
   */
  readonly packer: SequentialPacker | undefined;

  /** A table for copies to device index `target` (-1: the CPU). */
  constructor(target: number, options: ResolvedOptions) {
    this.target = target;
    if (options.packCpuTensors) this.packer = new SequentialPacker(options);
  }

  /** Returns the index lists for reuse once submission is over. */
  releaseLists(): void {
    returnList(this.h2d);
    this.packer?.dispose();
  }

  /** Records a leaf; returns what stands in its place in the result. */
  add(leaf: Leaf): unknown {
    this.tensors++;
    const target = this.target;
    if (leaf instanceof Tensor) {
      const source = tensorDevice(leaf);
      this.bytes += leaf.byteLength;
      if (source === target) return leaf;
      return this.#move(leaf, source, leaf.dtype, leaf.shape, leaf.byteLength);
    }
    const dtype = dtypeOfArray(leaf)!;
    this.bytes += leaf.byteLength;
    if (target === CPU) {
      // As in the reference package: a CPU leaf to the CPU is not copied.
      return createTensor(dtype, [leaf.length], CPU, leaf.byteLength, leaf);
    }
    return this.#move(leaf, CPU, dtype, [leaf.length], leaf.byteLength);
  }

  #move(
    leaf: Leaf,
    source: number,
    dtype: DType,
    shape: readonly number[],
    byteLength: number,
  ): Tensor {
    const index = this.leaves.length;
    const output = createTensor(dtype, shape, this.target, byteLength);
    this.leaves.push(leaf);
    this.outputs.push(output);
    if (this.target === CPU) {
      const d2h = this.d2h;
      if (this.packer && d2h.length > 0 && tensorDevice(this.leaves[d2h[0]] as Tensor) !== source) {
        this.packer.valid = false;
      }
      this.packer?.add(d2h.length, byteLength);
      d2h.push(index);
    } else if (source === CPU) {
      this.packer?.add(this.h2d.length, byteLength);
      this.h2d.push(index);
    } else {
      this.peer.push(index);
    }
    return output;
  }
}

/** A CPU leaf's bytes as a TypedArray (the leaf itself, or a tensor's view). */
function hostBytes(leaf: Leaf): TypedArray {
  return leaf instanceof Tensor ? tensorData(leaf) ?? leaf.toTypedArray() : leaf;
}

let pageableScratch = new ArrayBuffer(0);
const pageableViews = new Map<unknown, TypedArray>();
/** A reusable ordinary (pageable) host buffer for packing without pinning. */
function pageableView(bytes: number, cls: TypedArrayConstructor): TypedArray {
  if (pageableScratch.byteLength < bytes) {
    pageableScratch = new ArrayBuffer(2 ** Math.ceil(Math.log2(bytes)));
    pageableViews.clear();
  }
  let view = pageableViews.get(cls);
  if (!view) pageableViews.set(cls, view = new cls(pageableScratch));
  return view;
}

/** Payload and element sizes of the outputs at `indices`, for planning. */
function sizesOf(
  outputs: Tensor[],
  indices: ArrayLike<number>,
): { bytes: number[]; elements: number[] } {
  const bytes: number[] = [];
  const elements: number[] = [];
  for (let k = 0; k < indices.length; k++) {
    const output = outputs[indices[k]];
    bytes.push(output.byteLength);
    elements.push(elementSizeOf(output.dtype));
  }
  return { bytes, elements };
}

function submit(table: LeafTable, options: ResolvedOptions): CopyJob<void> {
  try {
    return queueCopies(table, options);
  } finally {
    table.releaseLists();
  }
}

function queueCopies(table: LeafTable, options: ResolvedOptions): CopyJob<void> {
  const { target, leaves, outputs } = table;
  const stats: CopyStats = {
    tensors: table.tensors,
    bytes: table.bytes,
    packedTensors: 0,
    chunks: 0,
    copies: 0,
  };
  // Everything to release when the copy settles.
  const retained: Storage[] = [];
  const staging: Block[] = [];
  const fences: DeviceEvent[] = [];
  const events: DeviceEvent[] = [];
  const devices = new Set<number>();
  let pieces: StagingPiece[] | undefined;

  const release = (): void => {
    for (const block of staging) pinnedPool.release(block);
    for (const storage of retained) storage.release();
    for (const { device, event } of fences) releaseEvent(device, event);
    staging.length = retained.length = fences.length = 0;
  };
  const abort = (): void => {
    drain(devices);
    for (const { device, event } of events) releaseEvent(device, event);
    for (const output of outputs) output.dispose();
    release();
  };

  try {
    // Inputs backed by pooled memory stay held until the copy settles.
    for (const leaf of leaves) {
      const storage = leaf instanceof Tensor ? tensorStorage(leaf) : undefined;
      if (storage) {
        storage.retain();
        retained.push(storage);
      }
    }
    if (table.h2d.length > 0) {
      pieces = hostToDevice(table, options, stats, staging);
      devices.add(target);
    }
    for (const [source, list] of groupBySource(table, table.peer)) {
      devices.add(target);
      devices.add(source);
      deviceToDevice(table, source, list, options, stats, staging, fences);
    }
    for (const [source, list] of groupBySource(table, table.d2h)) {
      devices.add(source);
      deviceToHost(table, source, list, options, stats, staging);
      const event = acquireEvent(source);
      events.push({ device: source, event });
      eventRecord(source, event);
    }

    let submitted: Promise<void> | undefined;
    if (devices.has(target)) {
      const event = acquireEvent(target);
      events.push({ device: target, event });
      if (pieces) {
        submitted = stageOnWorkers(pieces).then(() => eventRecord(target, event));
      } else {
        eventRecord(target, event);
      }
    }

    return {
      events,
      submitted,
      stats,
      complete(): void {
        release();
        if (!options.usePinnedStaging) {
          // Without pinned staging, CUDA→CPU outputs live in ordinary memory.
          for (const i of table.d2h) {
            rebindTensor(outputs[i], outputs[i].toTypedArray().slice());
          }
        }
      },
      abort,
    };
  } catch (error) {
    abort();
    return {
      events: [],
      submitted: Promise.reject(error),
      stats,
      complete(): void {},
      abort(): void {},
    };
  }
}

/** The leaves at `indices` (CUDA tensors) grouped by their device, in order. */
function groupBySource(table: LeafTable, indices: number[]): Map<number, number[]> {
  const groups = new Map<number, number[]>();
  for (const i of indices) {
    const source = tensorDevice(table.leaves[i] as Tensor);
    let list = groups.get(source);
    if (!list) groups.set(source, list = []);
    list.push(i);
  }
  return groups;
}

/**
 * Queues the CUDA→other-CUDA leaves of one source device: small ones are
 * gathered on the source into one packed buffer per chunk (one kernel) and
 * sent with one peer copy into a chunk on the target; the rest one peer copy
 * each. Every peer copy is fenced with both devices' streams.
 */
function deviceToDevice(
  table: LeafTable,
  source: number,
  list: number[],
  options: ResolvedOptions,
  stats: CopyStats,
  staging: Block[],
  fences: DeviceEvent[],
): void {
  const { target, leaves, outputs } = table;
  const pool = devicePool(target);
  const peerCopy = (dst: number, src: number, bytes: number): void => {
    // Fence A is recorded on the target's stream, fence B on the source's.
    const fenceA = acquireEvent(target);
    const fenceB = acquireEvent(source);
    fences.push({ device: target, event: fenceA }, { device: source, event: fenceB });
    copyPeer(target, dst, source, src, bytes, fenceA, fenceB);
    stats.copies++;
  };
  const packed = gatherChunks(
    table,
    source,
    list,
    options.packCpuTensors ? planChunks(undefined, table, list, options, pool) : [],
    pool,
    staging,
    stats,
    (entries, count, scratch, dst, payload) => {
      gather(source, entries, count, scratch, 0, 0, 0);
      // The peer copy runs on the source's stream: later users of the
      // scratch block queue behind it.
      peerCopy(dst, scratch, payload);
    },
  );
  for (let k = 0; k < list.length; k++) {
    if (packed[k]) continue;
    const i = list[k];
    const bytes = outputs[i].byteLength;
    bindTensor(outputs[i], new Storage(pool, pool.acquire(bytes), 1), 0);
    peerCopy(tensorAddress(outputs[i]), tensorAddress(leaves[i] as Tensor), bytes);
  }
}

/**
 * Queues every CPU→CUDA leaf: packed chunks first (one DMA each), then the
 * rest one by one. Returns the pieces left for the staging Workers, if any.
 */
function hostToDevice(
  table: LeafTable,
  options: ResolvedOptions,
  stats: CopyStats,
  staging: Block[],
): StagingPiece[] | undefined {
  const { target, leaves, outputs } = table;
  const h2d = table.h2d.view();
  const pool = devicePool(target);
  const packed = new Uint8Array(h2d.length);
  if (options.packCpuTensors) {
    for (const { plan, block } of planChunks(table.packer, table, h2d, options, pool)) {
      const { members, offsets, base, start, end } = plan;
      const payload = end - start;
      const storage = new Storage(pool, block, members.length);
      const stage = options.usePinnedStaging ? pinnedPool.acquire(payload) : undefined;
      if (stage) staging.push(stage);
      // Consecutive leaves mostly share a class: reuse the last view.
      let lastClass: unknown;
      let view: TypedArray | undefined;
      let elementBytes = 1;
      for (let m = 0; m < members.length; m++) {
        const k = members[m];
        const i = h2d[k];
        packed[k] = 1;
        const src = hostBytes(leaves[i]);
        const cls = src.constructor as TypedArrayConstructor;
        if (cls !== lastClass) {
          lastClass = cls;
          view = stage ? pinnedView(stage, cls) : pageableView(payload, cls);
          elementBytes = cls.BYTES_PER_ELEMENT;
        }
        view!.set(src as never, (offsets[m] - start) / elementBytes);
      }
      if (stage) copyAsync(target, base + start, stage.address, payload, 0);
      else copyFromBuffer(target, base + start, new Uint8Array(pageableScratch), 0, payload);
      // Outputs are bound while the DMA runs.
      for (let m = 0; m < members.length; m++) {
        bindTensor(outputs[h2d[members[m]]], storage, offsets[m]);
      }
      stats.packedTensors += members.length;
      stats.chunks++;
      stats.copies++;
    }
  }
  let pieces: StagingPiece[] | undefined;
  for (let k = 0; k < h2d.length; k++) {
    if (packed[k]) continue;
    const i = h2d[k];
    const bytes = outputs[i].byteLength;
    const block = pool.acquire(bytes);
    bindTensor(outputs[i], new Storage(pool, block, 1), 0);
    if (bytes === 0) continue;
    const leaf = leaves[i];
    stats.copies++;
    if (leaf instanceof Tensor && leaf.pinned) {
      copyAsync(target, block.address, tensorAddress(leaf), bytes, 0);
    } else if (!options.usePinnedStaging) {
      copyFromBuffer(target, block.address, hostBytes(leaf), 0, bytes);
    } else if (options.useBackgroundThread && bytes >= WORKER_MIN_BYTES) {
      splitIntoPieces(target, block.address, addressOf(hostBytes(leaf)), bytes, pieces ??= []);
    } else {
      const src = hostBytes(leaf);
      const stage = pinnedPool.acquire(bytes);
      staging.push(stage);
      pinnedView(stage, src.constructor as TypedArrayConstructor).set(src as never, 0);
      copyAsync(target, block.address, stage.address, bytes, 0);
    }
  }
  return pieces;
}

/** Packed chunks, each with the pool block it lives in. */
interface PlacedChunk {
  plan: ChunkPlan;
  block: Block;
}

/**
 * The packed chunks for the leaves at `indices`, on blocks of `pool`: the
 * walk's plan (`packer`) when it holds, else the general planner's.
 */
function planChunks(
  packer: SequentialPacker | undefined,
  table: LeafTable,
  indices: ArrayLike<number>,
  options: ResolvedOptions,
  pool: BlockPool,
): PlacedChunk[] {
  const chunkBlocks: Block[] = [];
  let plans = sequentialChunk(packer, pool, chunkBlocks);
  if (!plans) {
    const sizes = sizesOf(table.outputs, indices);
    plans = planPacking(
      sizes.bytes,
      sizes.elements,
      packCandidates(sizes.bytes, options),
      options,
      (_, capacity) => {
        const block = pool.acquire(capacity);
        chunkBlocks.push(block);
        return block.address;
      },
    );
  }
  return plans.map((plan, c) => ({ plan, block: chunkBlocks[c] }));
}

/**
 * Gathers each chunk's members (CUDA tensors of `source`) into one packed
 * scratch buffer on the source device with one kernel, and lets `send`
 * queue the transfer of that buffer to the chunk's address. Binds the
 * outputs to their chunk. Returns which positions of `list` were packed.
 */
function gatherChunks(
  table: LeafTable,
  source: number,
  list: number[],
  chunks: PlacedChunk[],
  chunkPool: BlockPool,
  staging: Block[],
  stats: CopyStats,
  send: (entries: number, count: number, scratch: number, dst: number, payload: number) => void,
): Uint8Array {
  const { leaves, outputs } = table;
  const packed = new Uint8Array(list.length);
  const scratchPool = devicePool(source);
  for (const { plan, block } of chunks) {
    const { members, offsets, base, start, end } = plan;
    const payload = end - start;
    const storage = new Storage(chunkPool, block, members.length);
    const tableBlock = pinnedPool.acquire(members.length * 24);
    staging.push(tableBlock);
    const entries = pinnedView(tableBlock, Float64Array);
    for (let m = 0; m < members.length; m++) {
      const i = list[members[m]];
      packed[members[m]] = 1;
      entries[3 * m] = tensorAddress(leaves[i] as Tensor);
      entries[3 * m + 1] = offsets[m] - start;
      entries[3 * m + 2] = outputs[i].byteLength;
      bindTensor(outputs[i], storage, offsets[m]);
    }
    const scratch = scratchPool.acquire(payload);
    send(tableBlock.address, members.length, scratch.address, base + start, payload);
    // Later users of the scratch block queue behind the send on the source's stream.
    scratchPool.release(scratch);
    stats.packedTensors += members.length;
    stats.chunks++;
  }
  return packed;
}

/**
 * The one chunk the walk planned, on a block of `pool`, or undefined when the
 * general planner must run (no plan, fewer than two candidates, or a block
 * whose address does not keep the plan's alignment).
 */
function sequentialChunk(
  packer: SequentialPacker | undefined,
  pool: BlockPool,
  chunkBlocks: Block[],
): ChunkPlan[] | undefined {
  if (!packer?.valid) return undefined;
  if (packer.members.length < 2) return [];
  const block = pool.acquire(packer.end);
  if (block.address % 256 !== 0) {
    pool.release(block);
    return undefined;
  }
  chunkBlocks.push(block);
  return [{
    members: packer.members.view(),
    offsets: packer.offsets.view(),
    base: block.address,
    start: 0,
    end: packer.end,
  }];
}

/**
 * Queues the CUDA→CPU leaves of one source device: small ones are gathered
 * on the device into one packed buffer per chunk (one kernel) and sent with
 * one DMA into a pinned chunk; the rest one by one into pinned blocks.
 */
function deviceToHost(
  table: LeafTable,
  source: number,
  list: number[],
  options: ResolvedOptions,
  stats: CopyStats,
  staging: Block[],
): void {
  const { leaves, outputs } = table;
  const packed = gatherChunks(
    table,
    source,
    list,
    options.packCpuTensors ? planChunks(table.packer, table, list, options, pinnedPool) : [],
    pinnedPool,
    staging,
    stats,
    (entries, count, scratch, dst, payload) => {
      gather(source, entries, count, scratch, dst, payload, 0);
      stats.copies++;
    },
  );
  for (let k = 0; k < list.length; k++) {
    if (packed[k]) continue;
    const i = list[k];
    const bytes = outputs[i].byteLength;
    const block = pinnedPool.acquire(bytes);
    bindTensor(outputs[i], new Storage(pinnedPool, block, 1), 0);
    if (bytes > 0) {
      copyAsync(source, block.address, tensorAddress(leaves[i] as Tensor), bytes, 0);
      stats.copies++;
    }
  }
}

/** Waits for every queued GPU operation of `devices` (failure paths only). */
function drain(devices: Set<number>): void {
  for (const device of devices) {
    try {
      streamSynchronize(device);
    } catch {
      // The copy already failed; what matters now is releasing memory.
    }
  }
}
