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
import { type DeviceIndex, deviceName } from "./device.ts";
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
  /** `"cpu"` or `"cuda:N"`. */
  readonly deviceName: string;
  // The same layout on other devices, by device index + 1, made on first use.
  #onDevice: (TensorLayout | undefined)[] | undefined;

  /** A layout; `shape` must be frozen (layouts and tensors share it). */
  constructor(dtype: DType, shape: readonly number[], byteLength: number, device: DeviceIndex) {
    this.dtype = dtype;
    this.shape = shape;
    this.byteLength = byteLength;
    this.device = device;
    this.deviceName = deviceName(device);
  }

  /** Number of elements. */
  get numel(): number {
    return this.byteLength / DTYPE_SIZE[this.dtype];
  }

  /** This layout on `device` (itself where it is there already), made once per device. */
  on(device: DeviceIndex): TensorLayout {
    if (device === this.device) return this;
    const table = this.#onDevice ??= [];
    return table[device + 1] ??= new TensorLayout(
      this.dtype,
      this.shape,
      this.byteLength,
      device,
    );
  }
}

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
  if (length < SHORT_LENGTHS) {
    return table[code][length] ??= makeVector(code, length, device);
  }
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
