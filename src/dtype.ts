/**
 * Element types, their TypedArray classes, and the states of a view's buffer
 * (detached, out of bounds) that both `Tensor.from` and the walk refuse.
 *
 * @module
 */

/** Element type of a tensor. */
export type DType =
  | "float16"
  | "bfloat16"
  | "float32"
  | "float64"
  | "int8"
  | "int16"
  | "int32"
  | "int64"
  | "uint8"
  | "uint16"
  | "uint32"
  | "uint64"
  | "bool";

/** Any TypedArray a tensor leaf may be (Float16Array where the runtime has it). */
export type TypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint8ClampedArray
  | Uint16Array
  | Uint32Array
  | BigUint64Array
  | Float16Array;

/** A constructor of one of the {@linkcode TypedArray} classes. */
export type TypedArrayConstructor = {
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray;
  readonly BYTES_PER_ELEMENT: number;
};

const Float16ArrayClass: TypedArrayConstructor | undefined =
  (globalThis as { Float16Array?: TypedArrayConstructor }).Float16Array;

/** Bytes per element of each dtype. */
export const DTYPE_SIZE: Readonly<Record<DType, number>> = {
  float16: 2,
  bfloat16: 2,
  float32: 4,
  float64: 8,
  int8: 1,
  int16: 2,
  int32: 4,
  int64: 8,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  uint64: 8,
  bool: 1,
};

const SIZE_OF = new Map<string, number>(Object.entries(DTYPE_SIZE));

/** Bytes per element of `dtype` (a Map lookup: faster than a keyed object load). */
export function elementSizeOf(dtype: DType): number {
  return SIZE_OF.get(dtype)!;
}

const ARRAY_CLASS: Readonly<Record<DType, TypedArrayConstructor>> = {
  float16: Float16ArrayClass ?? Uint16Array,
  bfloat16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

/**
 * The built-in TypedArray classes a leaf may be, in a fixed order
 * (`Float16Array` last, where the runtime has it); `src/array_code.ts`
 * numbers them by this order.
 */
export const BUILTIN_CLASSES: readonly TypedArrayConstructor[] = [
  Float32Array,
  Float64Array,
  Int8Array,
  Int16Array,
  Int32Array,
  BigInt64Array,
  Uint8Array,
  Uint8ClampedArray,
  Uint16Array,
  Uint32Array,
  BigUint64Array,
  ...(Float16ArrayClass ? [Float16ArrayClass] : []),
];

const DTYPE_OF_NAME = new Map<string, DType>([
  ["Float32Array", "float32"],
  ["Float64Array", "float64"],
  ["Int8Array", "int8"],
  ["Int16Array", "int16"],
  ["Int32Array", "int32"],
  ["BigInt64Array", "int64"],
  ["Uint8Array", "uint8"],
  ["Uint8ClampedArray", "uint8"],
  ["Uint16Array", "uint16"],
  ["Uint32Array", "uint32"],
  ["BigUint64Array", "uint64"],
  ["Float16Array", "float16"],
]);

const BUILTIN_CLASS_OF_NAME = new Map<string, TypedArrayConstructor>(
  BUILTIN_CLASSES.map((cls) => [cls.name, cls]),
);

/**
 * The getter behind `%TypedArray%.prototype[Symbol.toStringTag]`: the
 * array's internal type name ("Float32Array"), or undefined for anything
 * that is not a TypedArray. Unlike `constructor` or the prototype, nothing
 * user code does to an array changes it, and it is the same for subclasses
 * and for arrays from another realm; it is also as fast as a Map lookup of
 * the constructor (measured 3.6 against 4.9–11 ns).
 */
const typedArrayName = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Int8Array.prototype),
  Symbol.toStringTag,
)!.get! as (this: unknown) => string | undefined;

/** The internal type name of a TypedArray ("Float32Array"), or undefined. */
export function typedArrayNameOf(value: unknown): string | undefined {
  return typedArrayName.call(value);
}

// The last name looked up and its dtype: neighbouring leaves mostly share
// their type, and comparing the (internalized) names costs less than the
// Map's string lookup, which the walk made twice per leaf.
let lastName: string | undefined;
let lastDtype: DType | undefined;

/** The dtype a TypedArray maps to (by its internal type), or undefined when it is no tensor class. */
export function dtypeOfArray(value: ArrayBufferView): DType | undefined {
  const name = typedArrayName.call(value);
  if (name === lastName) return lastDtype;
  const dtype = name === undefined ? undefined : DTYPE_OF_NAME.get(name);
  lastName = name;
  lastDtype = dtype;
  return dtype;
}

/**
 * The built-in class of a TypedArray's internal type, whatever its
 * `constructor` says: views of that class copy its elements byte for byte.
 */
export function builtinClassOf(value: TypedArray): TypedArrayConstructor {
  return BUILTIN_CLASS_OF_NAME.get(typedArrayName.call(value)!)!;
}

/** Whether `value` is a TypedArray of a supported type (subclasses and other realms included). */
export function isTypedArray(value: unknown): value is TypedArray {
  const name = typedArrayName.call(value);
  if (name === undefined) return false;
  return name === lastName ? lastDtype !== undefined : DTYPE_OF_NAME.has(name);
}

/** Whether `dtype` names a supported dtype. */
export function isDType(dtype: unknown): dtype is DType {
  return typeof dtype === "string" && Object.hasOwn(DTYPE_SIZE, dtype);
}

/** The TypedArray class `toTypedArray()` returns for `dtype`. */
export function arrayClassOf(dtype: DType): TypedArrayConstructor {
  return ARRAY_CLASS[dtype];
}

/** Whether data of array class `cls` may be wrapped as `dtype`. */
export function arrayFitsDType(value: ArrayBufferView, dtype: DType): boolean {
  const natural = dtypeOfArray(value);
  if (natural === dtype) return true;
  const name = typedArrayName.call(value);
  if (dtype === "bool") return name === "Uint8Array";
  if (dtype === "bfloat16" || dtype === "float16") {
    return name === "Uint16Array" || natural === "float16";
  }
  return false;
}

const TYPED_ARRAY_PROTOTYPE = Object.getPrototypeOf(Int8Array.prototype);
const intrinsicGetter = (name: string) =>
  Object.getOwnPropertyDescriptor(TYPED_ARRAY_PROTOTYPE, name)!.get! as (this: unknown) => number;
const byteLengthGetter = intrinsicGetter("byteLength");
const byteOffsetGetter = intrinsicGetter("byteOffset");
const lengthGetter = intrinsicGetter("length");
const bufferGetter = Object.getOwnPropertyDescriptor(TYPED_ARRAY_PROTOTYPE, "buffer")!.get! as (
  this: unknown,
) => ArrayBufferLike;

/**
 * A TypedArray's byte length as the engine knows it. `view.byteLength` is
 * an ordinary property read: a subclass's getter or an own property may
 * answer anything, and a copy that trusted it read past the buffer's end
 * (a crash, or neighbouring memory sent to the device).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { viewByteLength } from "./dtype.ts";
 * const view = new Uint8Array(16);
 * Object.defineProperty(view, "byteLength", { value: 4096 });
 * assert.equal(viewByteLength(view), 16);
 * ```
 */
export function viewByteLength(view: ArrayBufferView): number {
  return byteLengthGetter.call(view);
}

/** A TypedArray's byte offset as the engine knows it (see {@linkcode viewByteLength}). */
export function viewByteOffset(view: ArrayBufferView): number {
  return byteOffsetGetter.call(view);
}

/** A TypedArray's length as the engine knows it (see {@linkcode viewByteLength}). */
export function viewLength(view: ArrayBufferView): number {
  return lengthGetter.call(view);
}

/** A TypedArray's buffer as the engine knows it (see {@linkcode viewByteLength}). */
export function viewBuffer(view: ArrayBufferView): ArrayBufferLike {
  return bufferGetter.call(view);
}

/** Whether a view's buffer is detached. */
export function isDetached(view: ArrayBufferView): boolean {
  return (view.buffer as ArrayBuffer).detached === true;
}

// The engine's own getters (a buffer's own properties could say anything).
const detachedGetter = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, "detached")!
  .get! as (this: unknown) => boolean;
const resizableGetter = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, "resizable")!
  .get! as (this: unknown) => boolean;

/** Whether an `ArrayBuffer` is detached, as the engine knows it. */
export function isArrayBufferDetached(buffer: ArrayBuffer): boolean {
  return detachedGetter.call(buffer);
}

/**
 * Whether `buffer` is an `ArrayBuffer` that cannot be resized (not a
 * shared one), as the engine knows it: its views keep their length until
 * it is detached.
 */
export function isFixedArrayBuffer(buffer: ArrayBufferLike): boolean {
  if (!(buffer instanceof ArrayBuffer)) return false;
  try {
    return !resizableGetter.call(buffer);
  } catch {
    return false; // (another realm's, or not an ArrayBuffer after all)
  }
}

/**
 * Whether a TypedArray's buffer is detached, as the engine knows it (the
 * view's `buffer` and the buffer's `detached` may be own properties that
 * say anything): an empty view too. A shared buffer never is.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isBufferDetached } from "./dtype.ts";
 * const empty = new Uint8Array(new ArrayBuffer(8), 8, 0);
 * assert.equal(isBufferDetached(empty), false);
 * structuredClone(empty.buffer, { transfer: [empty.buffer as ArrayBuffer] });
 * assert.equal(isBufferDetached(empty), true);
 * ```
 */
export function isBufferDetached(view: ArrayBufferView): boolean {
  const buffer = viewBuffer(view);
  return buffer instanceof ArrayBuffer && isArrayBufferDetached(buffer);
}

const validatingAt = Object.getPrototypeOf(Int8Array.prototype).at as (
  this: ArrayBufferView,
  index: number,
) => unknown;

/**
 * Whether a fixed-length view no longer fits its (resized) buffer. Such a
 * view reads as length 0, like an empty one; the engine's own validation
 * (every %TypedArray% method runs it) tells them apart.
 */
export function isOutOfBounds(view: ArrayBufferView): boolean {
  try {
    validatingAt.call(view, 0);
    return false;
  } catch {
    return !isDetached(view);
  }
}
