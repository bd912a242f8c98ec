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

// The codes below are ARRAY_CLASSES' indices, written out: a `switch` on
// the name compares interned strings in place, where a cache of the last
// name missed on every leaf of a batch that mixes classes and fell back to
// a search of the name list (5.9 against 11–12 ns a leaf; the 16-sample
// batch of TypedArray leaves 0.915× in bench/ab_processes.ts).
// tests/array_code_test.ts checks them against the list. Float16Array is
// in the list only where the runtime has the class at import.
const FLOAT16_CODE = ARRAY_CLASSES.length > 11 ? 11 : NO_CODE;

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
  switch (typedArrayName.call(view)) {
    case "Float32Array":
      return 0;
    case "Float64Array":
      return 1;
    case "Int8Array":
      return 2;
    case "Int16Array":
      return 3;
    case "Int32Array":
      return 4;
    case "BigInt64Array":
      return 5;
    case "Uint8Array":
      return 6;
    case "Uint8ClampedArray":
      return 7;
    case "Uint16Array":
      return 8;
    case "Uint32Array":
      return 9;
    case "BigUint64Array":
      return 10;
    case "Float16Array":
      return FLOAT16_CODE;
    default:
      return NO_CODE;
  }
}

/** The dtype of each code (`Uint8ClampedArray`: uint8). */
export const CODE_DTYPE: readonly DType[] = ARRAY_CLASSES.map((cls) =>
  dtypeOfArray(new cls(new ArrayBuffer(0)))!
);
