/**
 * Small-integer codes of the built-in TypedArray classes, so that a leaf's
 * class is derived once per copy (in the walk) and later steps index
 * tables by it: packing picks its view and element shift without reading
 * the class again.
 *
 * @module
 */

import { BUILTIN_CLASSES, type DType, dtypeOfArray, type TypedArrayConstructor } from "./dtype.ts";

/** The classes by code: dtype.ts's one list of the built-in classes. */
export const ARRAY_CLASSES: readonly TypedArrayConstructor[] = BUILTIN_CLASSES;

/** No code: not a built-in TypedArray, or bytes the walk did not read (pooled memory). */
export const NO_CODE = 255;

/** The element size of each code. */
export const CODE_BYTES: readonly number[] = ARRAY_CLASSES.map((cls) => cls.BYTES_PER_ELEMENT);
/** The log2 of each code's element size. */
export const CODE_SHIFT: readonly number[] = CODE_BYTES.map((bytes) => Math.log2(bytes));

const typedArrayName = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Int8Array.prototype),
  Symbol.toStringTag,
)!.get! as (this: unknown) => string | undefined;

const NAMES: readonly string[] = ARRAY_CLASSES.map((cls) => cls.name);
// The last name looked up and its code: neighbouring leaves mostly share a class.
let lastName: string | undefined;
let lastCode = NO_CODE;

/**
 * The code of `view`'s built-in class, by its internal type name (never
 * its `constructor`: a subclass packs as its base class, bytes unchanged),
 * or {@linkcode NO_CODE}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ARRAY_CLASSES, arrayCodeOf } from "./array_code.ts";
 * assert.equal(ARRAY_CLASSES[arrayCodeOf(new Int32Array(1))], Int32Array);
 * ```
 */
export function arrayCodeOf(view: ArrayBufferView): number {
  const name = typedArrayName.call(view);
  if (name === lastName) return lastCode;
  const index = name === undefined ? -1 : NAMES.indexOf(name);
  lastName = name;
  return lastCode = index < 0 ? NO_CODE : index;
}

/** The dtype of each code (`Uint8ClampedArray`: uint8). */
export const CODE_DTYPE: readonly DType[] = ARRAY_CLASSES.map((cls) =>
  dtypeOfArray(new cls(new ArrayBuffer(0)))!
);
