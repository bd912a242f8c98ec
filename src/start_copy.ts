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
import type { Block } from "./block_pool.ts";
import { AsyncCopyHandle, type CopyJob, type CopyStats, reapFinished } from "./copy_handle.ts";
import { CPU, parseDevice } from "./device.ts";
import { devicePool } from "./device_memory.ts";
import {
  type DType,
  DTYPE_SIZE,
  dtypeOfArray,
  type TypedArray,
  type TypedArrayConstructor,
} from "./dtype.ts";
import { acquireEvent, releaseEvent } from "./event_pool.ts";
import { type ResolvedOptions, resolveOptions, type StartCopyOptions } from "./options.ts";
import { packCandidates, planPacking } from "./pack_plan.ts";
import { pinnedPool, pinnedView } from "./pinned_memory.ts";
import { Storage } from "./storage.ts";
import {
  createTensor,
  Tensor,
  tensorAddress,
  tensorData,
  tensorDevice,
  tensorStorage,
} from "./tensor.ts";
import { type Leaf, walk } from "./traverse.ts";
import { splitIntoPieces, stageOnWorkers, type StagingPiece } from "./worker_pool.ts";
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
  const { leaves, build } = walk(data);
  reapFinished();
  const job = submit(leaves, target, resolved);
  return new AsyncCopyHandle<CopyResult<T>>({
    ...job,
    complete: () => build(job.complete()) as CopyResult<T>,
  });
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

function submit(
  leaves: Leaf[],
  target: number,
  options: ResolvedOptions,
): CopyJob<unknown[]> {
  const n = leaves.length;
  const outputs = new Array<unknown>(n);
  const stats: CopyStats = { tensors: n, bytes: 0, packedTensors: 0, chunks: 0, copies: 0 };
  const dtypes = new Array<DType>(n);
  const sizes = new Array<number>(n);
  const sources = new Int32Array(n);
  const h2d: number[] = [];
  const peer: number[] = [];
  const d2h = new Map<number, number[]>();
  // Everything to release when the copy settles.
  const retained: Storage[] = [];
  const staging: Block[] = [];
  const created: Tensor[] = [];
  const fences: number[] = [];
  const events: number[] = [];
  const devices = new Set<number>();
  let pieces: StagingPiece[] | undefined;
  const toUnpin: number[] = [];

  for (let i = 0; i < n; i++) {
    const leaf = leaves[i];
    let source = CPU;
    if (leaf instanceof Tensor) {
      source = tensorDevice(leaf);
      dtypes[i] = leaf.dtype;
      sizes[i] = leaf.byteLength;
      if (source === target) {
        outputs[i] = leaf;
        stats.bytes += sizes[i];
        continue;
      }
      const storage = tensorStorage(leaf);
      if (storage) {
        storage.retain();
        retained.push(storage);
      }
    } else {
      dtypes[i] = dtypeOfArray(leaf)!;
      sizes[i] = leaf.byteLength;
      if (target === CPU) {
        // As in the reference package: a CPU leaf to the CPU is not copied.
        outputs[i] = createTensor({
          dtype: dtypes[i],
          shape: [leaf.length],
          device: CPU,
          byteLength: sizes[i],
          data: leaf,
        });
        stats.bytes += sizes[i];
        continue;
      }
    }
    stats.bytes += sizes[i];
    sources[i] = source;
    if (target !== CPU) {
      (source === CPU ? h2d : peer).push(i);
    } else {
      let list = d2h.get(source);
      if (!list) d2h.set(source, list = []);
      list.push(i);
    }
  }

  const output = (i: number, device: number, storage: Storage, offset: number): void => {
    const leaf = leaves[i];
    const tensor = createTensor({
      dtype: dtypes[i],
      shape: leaf instanceof Tensor ? leaf.shape : [leaf.length],
      device,
      byteLength: sizes[i],
      storage,
      offset,
    });
    outputs[i] = tensor;
    created.push(tensor);
  };
  const sourceAddress = (i: number): number => tensorAddress(leaves[i] as Tensor);

  const release = (): void => {
    for (const block of staging) pinnedPool.release(block);
    for (const storage of retained) storage.release();
    for (const event of fences) releaseEvent(event);
    staging.length = retained.length = fences.length = 0;
  };

  try {
    if (h2d.length > 0) {
      devices.add(target);
      const pool = devicePool(target);
      const packed = new Uint8Array(h2d.length);
      if (options.packCpuTensors) {
        const h2dSizes = h2d.map((i) => sizes[i]);
        const elementSizes = h2d.map((i) => DTYPE_SIZE[dtypes[i]]);
        const chunkBlocks: Block[] = [];
        const chunks = planPacking(
          h2dSizes,
          elementSizes,
          packCandidates(h2dSizes, options),
          options,
          (_, capacity) => {
            const block = pool.acquire(capacity);
            chunkBlocks.push(block);
            return block.address;
          },
        );
        for (let c = 0; c < chunks.length; c++) {
          const { members, offsets, base, start, end } = chunks[c];
          const payload = end - start;
          const storage = new Storage(pool, chunkBlocks[c], members.length);
          const stage = options.usePinnedStaging ? pinnedPool.acquire(payload) : undefined;
          if (stage) staging.push(stage);
          for (let m = 0; m < members.length; m++) {
            const i = h2d[members[m]];
            packed[members[m]] = 1;
            const src = hostBytes(leaves[i]);
            const cls = src.constructor as TypedArrayConstructor;
            const view = stage ? pinnedView(stage, cls) : pageableView(payload, cls);
            view.set(src as never, (offsets[m] - start) / cls.BYTES_PER_ELEMENT);
          }
          if (stage) copyAsync(target, base + start, stage.address, payload, 0);
          else copyFromBuffer(target, base + start, new Uint8Array(pageableScratch), 0, payload);
          // Outputs are built while the DMA runs.
          for (let m = 0; m < members.length; m++) {
            output(h2d[members[m]], target, storage, offsets[m]);
          }
          stats.packedTensors += members.length;
          stats.chunks++;
          stats.copies++;
        }
      }
      for (let k = 0; k < h2d.length; k++) {
        if (packed[k]) continue;
        const i = h2d[k];
        const bytes = sizes[i];
        const block = pool.acquire(bytes);
        output(i, target, new Storage(pool, block, 1), 0);
        if (bytes === 0) continue;
        const leaf = leaves[i];
        stats.copies++;
        if (leaf instanceof Tensor && leaf.pinned) {
          copyAsync(target, block.address, sourceAddress(i), bytes, 0);
        } else if (!options.usePinnedStaging) {
          copyFromBuffer(target, block.address, hostBytes(leaf), 0, bytes);
        } else if (options.useBackgroundThread && bytes >= WORKER_MIN_BYTES) {
          splitIntoPieces(target, block.address, addressOf(hostBytes(leaf)), bytes, pieces ??= []);
        } else {
          const src = hostBytes(leaf);
          const stage = pinnedPool.acquire(bytes);
          staging.push(stage);
          pinnedView(stage, src.constructor as never).set(src as never, 0);
          copyAsync(target, block.address, stage.address, bytes, 0);
        }
      }
    }

    for (const i of peer) {
      devices.add(target);
      devices.add(sources[i]);
      const pool = devicePool(target);
      const block = pool.acquire(sizes[i]);
      output(i, target, new Storage(pool, block, 1), 0);
      const fenceA = acquireEvent();
      const fenceB = acquireEvent();
      fences.push(fenceA, fenceB);
      copyPeer(target, block.address, sources[i], sourceAddress(i), sizes[i], fenceA, fenceB);
      stats.copies++;
    }

    for (const [source, list] of d2h) {
      devices.add(source);
      const packed = new Uint8Array(list.length);
      if (options.packCpuTensors) {
        const listSizes = list.map((i) => sizes[i]);
        const elementSizes = list.map((i) => DTYPE_SIZE[dtypes[i]]);
        const chunkBlocks: Block[] = [];
        const chunks = planPacking(
          listSizes,
          elementSizes,
          packCandidates(listSizes, options),
          options,
          (_, capacity) => {
            const block = pinnedPool.acquire(capacity);
            chunkBlocks.push(block);
            return block.address;
          },
        );
        const scratchPool = devicePool(source);
        for (let c = 0; c < chunks.length; c++) {
          const { members, offsets, base, start, end } = chunks[c];
          const payload = end - start;
          const storage = new Storage(pinnedPool, chunkBlocks[c], members.length);
          const tableBlock = pinnedPool.acquire(members.length * 24);
          staging.push(tableBlock);
          const table = pinnedView(tableBlock, Float64Array);
          for (let m = 0; m < members.length; m++) {
            const i = list[members[m]];
            packed[members[m]] = 1;
            table[3 * m] = sourceAddress(i);
            table[3 * m + 1] = offsets[m] - start;
            table[3 * m + 2] = sizes[i];
            output(i, CPU, storage, offsets[m]);
          }
          const scratch = scratchPool.acquire(payload);
          gather(
            source,
            tableBlock.address,
            members.length,
            scratch.address,
            base + start,
            payload,
            0,
          );
          // Later users of the scratch block queue on the same stream.
          scratchPool.release(scratch);
          stats.packedTensors += members.length;
          stats.chunks++;
          stats.copies++;
        }
      }
      for (let k = 0; k < list.length; k++) {
        if (packed[k]) continue;
        const i = list[k];
        const block = pinnedPool.acquire(sizes[i]);
        output(i, CPU, new Storage(pinnedPool, block, 1), 0);
        if (sizes[i] > 0) {
          copyAsync(source, block.address, sourceAddress(i), sizes[i], 0);
          stats.copies++;
        }
      }
      if (!options.usePinnedStaging) toUnpin.push(...list);
      const event = acquireEvent();
      events.push(event);
      eventRecord(source, event);
    }

    let submitted: Promise<void> | undefined;
    if (devices.has(target) && target !== CPU) {
      const event = acquireEvent();
      events.push(event);
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
      complete(): unknown[] {
        release();
        for (const i of toUnpin) {
          // Without pinned staging, CUDA→CPU outputs live in ordinary memory.
          const pinned = outputs[i] as Tensor;
          const copy = pinned.toTypedArray().slice();
          outputs[i] = createTensor({
            dtype: pinned.dtype,
            shape: pinned.shape,
            device: CPU,
            byteLength: pinned.byteLength,
            data: copy,
          });
          pinned.dispose();
        }
        return outputs;
      },
      abort(): void {
        drain(devices);
        for (const event of events) releaseEvent(event);
        for (const tensor of created) tensor.dispose();
        release();
      },
    };
  } catch (error) {
    drain(devices);
    for (const event of events) releaseEvent(event);
    for (const tensor of created) tensor.dispose();
    release();
    return {
      events: [],
      submitted: Promise.reject(error),
      stats,
      complete: () => outputs,
      abort(): void {},
    };
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
