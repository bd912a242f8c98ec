/**
 * `Tensor.from`'s argument checks: what a tensor over caller data may be
 * (a supported TypedArray, a dtype that fits its class, a shape of its
 * element count), and the errors for everything else.
 *
 * @module
 */

import {
  arrayFitsDType,
  builtinClassOf,
  type DType,
  DTYPE_SIZE,
  dtypeOfArray,
  isDetached,
  isDType,
  isOutOfBounds,
  type TypedArray,
  viewBuffer,
  viewByteOffset,
  viewLength,
} from "./dtype.ts";
import { shown } from "./shown.ts";

/**
 * The dtype and dimensions of a tensor over `data`, or the error that
 * `Tensor.from` throws for them.
 *
 * @throws {TypeError} for data that is no supported TypedArray, an unknown
 * dtype, a dtype that does not fit the array class, or a detached buffer
 * @throws {RangeError} when the product of `shape` is not `data.length`
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkFromArgs } from "./tensor_from_args.ts";
 * const { type, dims } = checkFromArgs(new Uint8Array(6), [2, 3], "bool");
 * assert.equal(type, "bool");
 * assert.deepEqual(dims, [2, 3]);
 * assert.throws(() => checkFromArgs(new Uint8Array(6), [4], undefined), RangeError);
 * ```
 */
export function checkFromArgs(
  data: TypedArray,
  shape: readonly number[] | undefined,
  dtype: DType | undefined,
): { type: DType; dims: number[]; view: TypedArray } {
  const natural = ArrayBuffer.isView(data) ? dtypeOfArray(data) : undefined;
  if (natural === undefined) {
    throw new TypeError(`Cannot create a tensor from ${describe(data)}: expected a TypedArray`);
  }
  if (isDetached(data)) {
    throw new TypeError("Cannot create a tensor over a detached ArrayBuffer");
  }
  if (data.byteLength === 0 && isOutOfBounds(data)) {
    throw new TypeError(
      "Cannot create a tensor over a view that no longer fits its resized buffer",
    );
  }
  const type = dtype ?? natural;
  if (!isDType(type)) {
    throw new TypeError(
      `Invalid dtype: expected one of ${Object.keys(DTYPE_SIZE).join(", ")}, got ${
        typeof type === "string" ? `"${type}"` : shown(type)
      }`,
    );
  }
  if (!arrayFitsDType(data, type)) {
    throw new TypeError(`Cannot create a "${type}" tensor from a ${data.constructor.name}`);
  }
  if (shape !== undefined && !Array.isArray(shape)) {
    throw new TypeError(`Invalid shape: expected an array of dimensions, got ${shown(shape)}`);
  }
  const length = viewLength(data); // the engine's, not the data's `length` property
  const dims = shape === undefined ? [length] : [...shape];
  let numel = 1;
  for (let i = 0; i < dims.length; i++) {
    const dim = dims[i];
    if (!Number.isSafeInteger(dim) || dim < 0) {
      throw new RangeError(
        `Invalid shape: expected non-negative integer dimensions, got [${
          dims.map(shown).join(", ")
        }]`,
      );
    }
    // -0 passes the checks above; a shape holds +0 (Object.is tells them apart).
    dims[i] = dim + 0;
    numel *= dim;
  }
  if (numel !== length) {
    throw new RangeError(
      `Invalid shape: expected ${length} elements (the data's), got [${
        dims.join(", ")
      }] (${numel} elements)`,
    );
  }
  // Over a buffer that can change size, keep a fixed-length view: a
  // length-tracking one would report a different size after a resize.
  const buffer = viewBuffer(data) as ArrayBuffer & { growable?: boolean };
  const resizable = buffer.resizable === true || buffer.growable === true;
  const view = resizable ? new (builtinClassOf(data))(buffer, viewByteOffset(data), length) : data;
  return { type, dims, view };
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  return value.constructor?.name ?? "an object";
}
