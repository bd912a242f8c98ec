/**
 * `Tensor`: a dtype, a shape and bytes on one device.
 *
 * A tensor either wraps host data the caller owns (a TypedArray; no copy)
 * or holds part of a pooled block (pinned host or device memory) through a
 * {@linkcode Storage}. Many tensors of a packed chunk share one storage.
 *
 * @module
 */

import { pointerOf, pointerOfView } from "../ffi/native.ts";
import { CPU, type DeviceIndex, deviceName } from "./device.ts";
import {
  arrayClassOf,
  type DType,
  DTYPE_SIZE,
  type TypedArray,
  typedArrayNameOf,
} from "./dtype.ts";
import { pinnedBuffer } from "./memory/pinned_memory.ts";
import type { Storage } from "./memory/storage.ts";
import { checkTensorArgs } from "./tensor_args.ts";

// Device strings are shared, not built per tensor.
const DEVICE_NAMES: string[] = [];

let create: (
  dtype: DType,
  shape: readonly number[],
  device: DeviceIndex,
  contents: number | TypedArray,
) => Tensor;
let bind: (tensor: Tensor, storage: Storage, offset: number) => void;
let rebind: (tensor: Tensor, data: TypedArray) => void;
let deviceOf: (tensor: Tensor) => DeviceIndex;
let storageOf: (tensor: Tensor) => Storage | undefined;
let offsetOf: (tensor: Tensor) => number;
let dataOf: (tensor: Tensor) => TypedArray | undefined;

/**
 * A tensor: `dtype`, `shape` and bytes on the CPU or a CUDA device.
 *
 * @example Wrapping host data without copying
 * ```ts
 * import { Tensor } from "@mtc/core";
 * const boxes = Tensor.from(new Float32Array(8), [2, 4]);
 * console.assert(boxes.device === "cpu" && boxes.numel === 8);
 * console.assert(boxes.toTypedArray() instanceof Float32Array);
 * ```
 */
export class Tensor {
  /** Element type. */
  readonly dtype: DType;
  /** Dimensions; their product is {@linkcode Tensor.numel}. */
  readonly shape: readonly number[];
  /** `"cpu"` or `"cuda:N"`. */
  readonly device: string;
  /** Payload size in bytes. */
  readonly byteLength: number;
  readonly #deviceIndex: DeviceIndex;
  #data: TypedArray | undefined;
  #storage: Storage | undefined;
  #offset = 0;
  #disposed = false;

  /** `contents`: the host data wrapped, or the byte length of a tensor to be bound. */
  private constructor(
    dtype: DType,
    shape: readonly number[],
    device: DeviceIndex,
    contents: number | TypedArray,
  ) {
    this.dtype = dtype;
    this.shape = shape;
    this.#deviceIndex = device;
    this.device = DEVICE_NAMES[device + 1] ??= deviceName(device);
    if (typeof contents === "number") {
      this.byteLength = contents;
    } else {
      this.byteLength = contents.byteLength;
      this.#data = contents;
    }
  }

  static {
    create = (dtype, shape, device, contents) => new Tensor(dtype, shape, device, contents);
    bind = (tensor, storage, offset) => {
      tensor.#storage = storage;
      tensor.#offset = offset;
    };
    rebind = (tensor, data) => {
      tensor.#storage?.release();
      tensor.#storage = undefined;
      tensor.#offset = 0;
      tensor.#data = data;
    };
    deviceOf = (tensor) => tensor.#deviceIndex;
    storageOf = (tensor) => tensor.#storage;
    offsetOf = (tensor) => tensor.#offset;
    dataOf = (tensor) => tensor.#data;
  }

  /**
   * Wraps host data as a CPU tensor, without copying.
   *
   * @param data the elements; a view of part of a larger buffer is valid
   * @param shape dimensions (default `[data.length]`)
   * @param dtype element type (default from the array class); `"bool"` takes
   * a `Uint8Array`, `"bfloat16"` and `"float16"` a `Uint16Array` or
   * `Float16Array`
   * @returns a CPU tensor over `data`'s memory
   * @throws {TypeError} for data that is no supported TypedArray, an unknown
   * dtype, a dtype that does not fit the array class, or a detached buffer
   * @throws {RangeError} when the product of `shape` is not `data.length`
   *
   * @example A 3×4 projection matrix
   * ```ts
   * import { Tensor } from "@mtc/core";
   * const projection = Tensor.from(new Float32Array(12), [3, 4]);
   * console.assert(projection.shape[0] === 3 && projection.byteLength === 48);
   * ```
   */
  static from(data: TypedArray, shape?: readonly number[], dtype?: DType): Tensor {
    const { type, dims } = checkTensorArgs(data, shape, dtype);
    return create(type, dims, CPU, data);
  }

  /** Number of elements. */
  get numel(): number {
    return this.byteLength / DTYPE_SIZE[this.dtype];
  }

  /** Whether the tensor's host memory is page-locked (pinned). */
  get pinned(): boolean {
    return this.#deviceIndex === CPU && this.#storage !== undefined;
  }

  /** Whether {@linkcode Tensor.dispose} was called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** Address of the first byte (host or device); null for an empty tensor. */
  get ptr(): Deno.PointerValue {
    this.#assertLive();
    if (this.#storage) return pointerOf(this.#storage.address + this.#offset);
    const data = this.#data!;
    return pointerOfView(data);
  }

  /**
   * The bytes as a TypedArray of the dtype's class (`Uint8Array` for bool,
   * `Uint16Array` for bfloat16). No copy: it views the tensor's memory.
   *
   * @throws {TypeError} on a CUDA tensor
   * @throws {Error} on a disposed tensor
   */
  toTypedArray(): TypedArray {
    this.#assertLive();
    if (this.#deviceIndex !== CPU) {
      throw new TypeError(
        `Cannot read a tensor on ${this.device} as a TypedArray: copy it to "cpu" first`,
      );
    }
    const cls = arrayClassOf(this.dtype);
    const data = this.#data;
    // The wrapped array itself only when it is exactly the dtype's built-in class.
    const exact = data && Object.getPrototypeOf(data) === cls.prototype;
    if (exact && typedArrayNameOf(data) === cls.name) return data;
    if (data) return new cls(data.buffer, data.byteOffset, this.numel);
    const storage = this.#storage!;
    return new cls(pinnedBuffer(storage.block), this.#offset, this.numel);
  }

  /**
   * Releases this tensor's hold on pooled pinned or device memory. Calling
   * it again does nothing. A disposed tensor cannot be read or copied.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#storage?.release();
    this.#storage = undefined;
    this.#data = undefined;
  }

  /** Same as {@linkcode Tensor.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Shows dtype, shape and device in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `Tensor(${this.dtype}, [${this.shape.join(", ")}], ${this.device}${
      this.#disposed ? ", disposed" : ""
    })`;
  }

  #assertLive(): void {
    if (!this.#disposed) return;
    const what = `${this.dtype} [${this.shape.join(", ")}] on ${this.device}`;
    throw new Error(`Cannot use a disposed tensor (${what}): copy or wrap the data again`);
  }
}

/**
 * Creates a tensor (library-internal) over `contents`: host data it wraps,
 * or a byte length. A tensor for a device copy is created unbound and bound
 * to its memory with {@linkcode bindTensor} once that memory is planned.
 */
export function createTensor(
  dtype: DType,
  shape: readonly number[],
  device: DeviceIndex,
  contents: number | TypedArray,
): Tensor {
  return create(dtype, shape, device, contents);
}

/** Points a tensor at `offset` in `storage`, whose hold it takes over. */
export function bindTensor(tensor: Tensor, storage: Storage, offset: number): void {
  bind(tensor, storage, offset);
}

/** Moves a tensor to host data it owns, releasing its storage (library-internal). */
export function rebindTensor(tensor: Tensor, data: TypedArray): void {
  rebind(tensor, data);
}

/** The device index of a tensor (library-internal). */
export function tensorDevice(tensor: Tensor): DeviceIndex {
  return deviceOf(tensor);
}

/** The pooled storage behind a tensor, if any (library-internal). */
export function tensorStorage(tensor: Tensor): Storage | undefined {
  return storageOf(tensor);
}

/** The address of a storage-backed tensor's first byte (library-internal). */
export function tensorAddress(tensor: Tensor): number {
  return storageOf(tensor)!.address + offsetOf(tensor);
}

/** The host data a CPU tensor wraps, if it wraps any (library-internal). */
export function tensorData(tensor: Tensor): TypedArray | undefined {
  return dataOf(tensor);
}
