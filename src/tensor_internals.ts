/**
 * Library-internal operations on tensors: creating them unbound, binding
 * them to pooled memory, and reading their private state. Not exported by
 * `mod.ts`.
 *
 * @module
 */

import type { ArenaMemory } from "./arena_index.ts";
import type { DeviceIndex } from "./device.ts";
import type { DType, TypedArray } from "./dtype.ts";
import type { Storage } from "./memory/storage.ts";
import {
  REJECTED_LEAF,
  type Tensor,
  type TensorFields,
  tensorInternals as internals,
} from "./tensor.ts";

export { REJECTED_LEAF, type TensorFields };

/**
 * Creates a tensor over `contents`: host data it wraps, or a byte length. A
 * tensor for a device copy is created unbound and bound to its memory with
 * {@linkcode bindTensor} once that memory is planned. `shape` must be frozen
 * (see {@linkcode vectorShape}): tensors share shapes.
 */
export function createTensor(
  dtype: DType,
  shape: readonly number[],
  device: DeviceIndex,
  contents: number | TypedArray,
): Tensor {
  return internals.create(dtype, shape, device, contents);
}

// Shapes of lengths below SHORT_LENGTHS by index (an array load per leaf,
// where a Map lookup showed in profiles), the others in a bounded Map.
const SHORT_LENGTHS = 4096;
const SHORT_SHAPES: (readonly number[] | undefined)[] = new Array(SHORT_LENGTHS).fill(undefined);
const VECTOR_SHAPES = new Map<number, readonly number[]>();
const MAX_SHARED_SHAPES = 4096;

/**
 * The frozen shape `[length]`, shared by every tensor of that length (no
 * array allocated per output, and none that a caller could change).
 */
export function vectorShape(length: number): readonly number[] {
  if (length < SHORT_LENGTHS) return SHORT_SHAPES[length] ??= Object.freeze([length]);
  let shape = VECTOR_SHAPES.get(length);
  if (shape === undefined) {
    shape = Object.freeze([length]);
    if (VECTOR_SHAPES.size < MAX_SHARED_SHAPES) VECTOR_SHAPES.set(length, shape);
  }
  return shape;
}

/**
 * Creates a tensor of `byteLength` bytes already bound to `offset` in
 * `storage` (whose hold it takes over): an output placed by the walk.
 */
export function createBoundTensor(
  dtype: DType,
  shape: readonly number[],
  device: DeviceIndex,
  byteLength: number,
  storage: Storage,
  offset: number,
): Tensor {
  return internals.createBound(dtype, shape, device, byteLength, storage, offset);
}

/** Points a tensor at `offset` in `storage`, whose hold it takes over. */
export function bindTensor(tensor: Tensor, storage: Storage, offset: number): void {
  internals.bind(tensor, storage, offset);
}

/** Moves a tensor to host data it owns, releasing its storage. */
export function rebindTensor(tensor: Tensor, data: TypedArray): void {
  internals.rebind(tensor, data);
}

/**
 * A new tensor over the same memory as `tensor` (same dtype, shape and
 * device), with its own hold on it: a hold on the pooled storage, or the
 * same host data. Disposing either leaves the other valid; the memory goes
 * back once both are disposed. `tensor` must not be disposed.
 */
export function shareTensor(tensor: Tensor): Tensor {
  return internals.share(tensor);
}

/** The device index of a tensor. */
export function tensorDevice(tensor: Tensor): DeviceIndex {
  return internals.device(tensor);
}

/** The pooled storage behind a tensor, if any. */
export function tensorStorage(tensor: Tensor): Storage | undefined {
  return internals.storage(tensor);
}

/** The address of a storage-backed tensor's first byte. */
export function tensorAddress(tensor: Tensor): number {
  return internals.storage(tensor)!.address + internals.offset(tensor);
}

/**
 * The host data of a tensor leaf as the walk reads it: as
 * {@linkcode tensorData}, or {@linkcode REJECTED_LEAF} for a disposed
 * tensor or one whose data no longer has its bytes (one call per leaf).
 */
export function tensorWalkData(tensor: Tensor): TypedArray | undefined | typeof REJECTED_LEAF {
  return internals.walkData(tensor);
}

/** Reads a tensor's description into `into` (one call, where a leaf needs several fields). */
export function readTensor(tensor: Tensor, into: TensorFields): void {
  internals.read(tensor, into);
}

/** The host arena a CPU tensor's data lies in, if any (found when the tensor was made). */
export function tensorArena(tensor: Tensor): ArenaMemory | undefined {
  return internals.arena(tensor);
}

/**
 * The host data a CPU tensor wraps, if it wraps any. A length-tracking view
 * whose buffer grew comes back as a fixed-length view of the tensor's
 * bytes; one whose buffer shrank or was detached comes back as it is (its
 * `byteLength` then differs from the tensor's, which callers check).
 */
export function tensorData(tensor: Tensor): TypedArray | undefined {
  return internals.data(tensor);
}
