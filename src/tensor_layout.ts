/**
 * `TensorLayout`: what a tensor is, apart from where its bytes lie (dtype,
 * shape, byte length, device), shared by the tensors that have it.
 *
 * Every copy allocates one output `Tensor` per leaf, and that allocation
 * (bytes, stores, and the scavenges it brings) grows with every field a
 * tensor has: with the description in one shared object a tensor has four
 * fields (56 bytes) where it had eight (88). Layouts are made once: the
 * outputs of TypedArray leaves share one per (device, class, length)
 * ({@linkcode vectorLayouts}), the outputs of a tensor leaf share the one
 * its input's layout keeps for the target ({@linkcode TensorLayout.on}).
 *
 * @module
 */

import { CODE_BYTES, CODE_DTYPE } from "./array_code.ts";
import { CPU, type DeviceIndex, deviceName } from "./device.ts";
import { type DType, DTYPE_SIZE } from "./dtype.ts";
import { vectorShape } from "./vector_shape.ts";

/**
 * A tensor's dtype, shape (frozen), byte length and device. Immutable;
 * tensors share it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { TensorLayout } from "./tensor_layout.ts";
 * const cpu = new TensorLayout("float32", Object.freeze([2, 4]), 32, -1);
 * assert.equal(cpu.deviceName, "cpu");
 * assert.equal(cpu.on(0).deviceName, "cuda:0");
 * assert.equal(cpu.on(0), cpu.on(0)); // made once
 * assert.equal(cpu.on(0).on(-1), cpu); // and back
 * assert.equal(cpu.on(0).shape, cpu.shape);
 * ```
 */
export class TensorLayout {
  /** Element type. */
  readonly dtype: DType;
  /** Dimensions (frozen; shared). */
  readonly shape: readonly number[];
  /** Payload bytes. */
  readonly byteLength: number;
  /** Device index (-1: the CPU). */
  readonly device: DeviceIndex;
  // A family is a layout made with `new` and the layouts `on` made from it
  // or its members, one per device, all sharing one table by device index
  // + 1: a tensor moved back and forth between devices keeps to its family,
  // bounded by the device count (a layout made from each layout would grow
  // a chain per round trip). Two loads from a layout to its kin.
  #family: (TensorLayout | undefined)[] | undefined;

  /** A layout; `shape` must be frozen (layouts and tensors share it). */
  constructor(dtype: DType, shape: readonly number[], byteLength: number, device: DeviceIndex);
  /** @internal A member of `family` (see {@linkcode TensorLayout.on}). */
  constructor(
    dtype: DType,
    shape: readonly number[],
    byteLength: number,
    device: DeviceIndex,
    family: (TensorLayout | undefined)[],
  );
  constructor(
    dtype: DType,
    shape: readonly number[],
    byteLength: number,
    device: DeviceIndex,
    family?: (TensorLayout | undefined)[],
  ) {
    this.dtype = dtype;
    this.shape = shape;
    this.byteLength = byteLength;
    this.device = device;
    this.#family = family;
  }

  /** `"cpu"` or `"cuda:N"` (made once per device). */
  get deviceName(): string {
    return DEVICE_NAMES[this.device + 1] ??= deviceName(this.device);
  }

  /** Number of elements. */
  get numel(): number {
    return this.byteLength / DTYPE_SIZE[this.dtype];
  }

  /** This layout on `device` (itself where it is there already), made once per family and device. */
  on(device: DeviceIndex): TensorLayout {
    // Small enough to inline at each leaf site; a new member out of line.
    if (device === this.device) return this;
    return this.#family?.[device + 1] ?? this.#join(device);
  }

  // A new member of this layout's family, on `device`.
  #join(device: DeviceIndex): TensorLayout {
    let family = this.#family;
    if (family === undefined) {
      // Room for the CPU and three devices before the array grows.
      family = this.#family = new Array(4);
      family[this.device + 1] = this;
    }
    return family[device + 1] = new TensorLayout(
      this.dtype,
      this.shape,
      this.byteLength,
      device,
      family,
    );
  }
}

// Device strings by index + 1, shared by every layout.
const DEVICE_NAMES: string[] = [];

/** Layouts of one-dimensional tensors on one device, by class code and length (see {@linkcode vectorLayouts}). */
export type VectorLayouts = (TensorLayout | undefined)[][];

// Lengths below SHORT_LENGTHS are kept by index, the others in a bounded Map
// (as vector_shape.ts keeps shapes).
const SHORT_LENGTHS = 4096;
const MAX_LONG_LAYOUTS = 4096;
const BY_DEVICE: (VectorLayouts | undefined)[] = [];
const LONG = new Map<string, TensorLayout>();

/**
 * The table of one-dimensional layouts on `device`, by class code (see
 * array_code.ts) and length, for {@linkcode vectorLayout}: a walk keeps
 * the table of its target and reads one entry per leaf.
 */
export function vectorLayouts(device: DeviceIndex): VectorLayouts {
  return BY_DEVICE[device + 1] ??= CODE_BYTES.map(() => []);
}

/**
 * The shared layout of a one-dimensional tensor of `length` elements of
 * class code `code` on the device of `table` (`vectorLayouts(device)`):
 * the output of a TypedArray leaf.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { arrayCodeOf } from "./array_code.ts";
 * import { vectorLayout, vectorLayouts } from "./tensor_layout.ts";
 * const code = arrayCodeOf(new Int32Array(3));
 * const layout = vectorLayout(vectorLayouts(0), code, 3, 0);
 * assert.deepEqual([layout.dtype, layout.shape, layout.byteLength, layout.deviceName], ["int32", [3], 12, "cuda:0"]);
 * assert.equal(vectorLayout(vectorLayouts(0), code, 3, 0), layout);
 * ```
 */
export function vectorLayout(
  table: VectorLayouts,
  code: number,
  length: number,
  device: DeviceIndex,
): TensorLayout {
  // Small enough to inline at each leaf site; the rest out of line.
  return (length < SHORT_LENGTHS ? table[code][length] : undefined) ??
    newVectorLayout(table, code, length, device);
}

// A layout not in the short table yet, or of a long vector.
function newVectorLayout(
  table: VectorLayouts,
  code: number,
  length: number,
  device: DeviceIndex,
): TensorLayout {
  if (length < SHORT_LENGTHS) return table[code][length] = makeVector(code, length, device);
  const key = `${device},${code},${length}`;
  let layout = LONG.get(key);
  if (layout === undefined) {
    layout = makeVector(code, length, device);
    if (LONG.size < MAX_LONG_LAYOUTS) LONG.set(key, layout);
  }
  return layout;
}

function makeVector(code: number, length: number, device: DeviceIndex): TensorLayout {
  return new TensorLayout(CODE_DTYPE[code], vectorShape(length), length * CODE_BYTES[code], device);
}

// The layouts `Tensor.from` gives, shared by the tensors of the usual
// meta-data shapes ([n] and [n, k] for small n and k), so that wrapping a
// batch in tensors allocates no layout per tensor and its copies find
// their layouts made: by dtype, then k, then n. Past MAX_CPU_LAYOUTS
// (an adversary's many shapes), layouts are made per tensor.
const CPU_RANK1: (TensorLayout | undefined)[][] = [];
const CPU_RANK2: (TensorLayout | undefined)[][][] = [];
const MAX_RANK1_LENGTH = 4096;
const MAX_RANK2_ROWS = 1024;
const MAX_RANK2_COLUMNS = 16;
const MAX_CPU_LAYOUTS = 1 << 16;
let cpuLayouts = 0;
const DTYPE_INDEX = new Map(Object.keys(DTYPE_SIZE).map((dtype, i) => [dtype, i]));

/**
 * The layout of a CPU tensor of `dtype`, dimensions `dims` (taken over:
 * frozen if used) and `byteLength`: shared for the usual meta-data shapes
 * (`[n]`, `[n, k]` with small n and k), else made for this tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cpuLayout } from "./tensor_layout.ts";
 * const boxes = cpuLayout("float32", [5, 4], 80);
 * assert.equal(cpuLayout("float32", [5, 4], 80), boxes);
 * assert.notEqual(cpuLayout("int32", [5, 4], 80), boxes);
 * assert.deepEqual([boxes.shape, boxes.deviceName], [[5, 4], "cpu"]);
 * ```
 */
export function cpuLayout(dtype: DType, dims: number[], byteLength: number): TensorLayout {
  const type = DTYPE_INDEX.get(dtype)!;
  if (dims.length === 1 && dims[0] < MAX_RANK1_LENGTH) {
    const table = CPU_RANK1[type] ??= [];
    return table[dims[0]] ??
      keep(table, dims[0], new TensorLayout(dtype, vectorShape(dims[0]), byteLength, CPU));
  }
  if (dims.length === 2 && dims[0] < MAX_RANK2_ROWS && dims[1] <= MAX_RANK2_COLUMNS) {
    const table = (CPU_RANK2[type] ??= [])[dims[1]] ??= [];
    return table[dims[0]] ??
      keep(table, dims[0], new TensorLayout(dtype, Object.freeze(dims), byteLength, CPU));
  }
  return new TensorLayout(dtype, Object.freeze(dims), byteLength, CPU);
}

// Keeps `layout` at `index` of `table` while fewer than MAX_CPU_LAYOUTS are kept.
function keep(
  table: (TensorLayout | undefined)[],
  index: number,
  layout: TensorLayout,
): TensorLayout {
  if (cpuLayouts < MAX_CPU_LAYOUTS) {
    cpuLayouts++;
    table[index] = layout;
  }
  return layout;
}

/** For tests: how many layouts `cpuLayout` and the long vector layouts keep (both bounded). */
export function keptLayouts(): { cpu: number; longVectors: number } {
  return { cpu: cpuLayouts, longVectors: LONG.size };
}
