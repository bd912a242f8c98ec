/**
 * A kernel's parameters as the user declares them (`module.kernel(name,
 * params)`): their types, each one's size (also its alignment, as the ABI
 * lays parameters out), their offsets in the launch buffer, the check of a
 * declaration against what the image declares where the driver can tell,
 * and the errors for an argument that does not fit its parameter.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parameterOffsets } from "./kernel_params.ts";
 * const { offsets, bytes } = parameterOffsets(["u32", "ptr", "f32"]);
 * assert.deepEqual([...offsets], [0, 8, 16]); // the pointer is aligned to 8
 * assert.equal(bytes, 20);
 * ```
 *
 * @module
 */

import { describe } from "./arguments.ts";

/**
 * A kernel parameter's type: `"ptr"` a device address (a `Tensor` on the
 * kernel's device, or a `bigint` address of your own), `"i32"`/`"u32"` 32-bit
 * integers, `"i64"`/`"u64"` 64-bit integers (a safe-integer number or a
 * bigint), `"f32"`/`"f64"` floating point numbers.
 */
export type ParamType = "ptr" | "i32" | "u32" | "i64" | "u64" | "f32" | "f64";

/** Bytes of each parameter type (also its alignment). */
export const PARAM_BYTES: Readonly<Record<ParamType, number>> = Object.freeze({
  ptr: 8,
  i32: 4,
  u32: 4,
  i64: 8,
  u64: 8,
  f32: 4,
  f64: 8,
});

/** Each parameter's offset (aligned to its size) and the bytes of all of them. */
export function parameterOffsets(
  params: readonly ParamType[],
): { offsets: Int32Array; bytes: number } {
  const offsets = new Int32Array(params.length);
  let bytes = 0;
  params.forEach((type, i) => {
    const size = PARAM_BYTES[type];
    bytes = Math.ceil(bytes / size) * size;
    offsets[i] = bytes;
    bytes += size;
  });
  return { offsets, bytes };
}

/** The error for argument `i`, `value`, that parameter type `type` cannot take. */
export function argError(i: number, type: ParamType, value: unknown): TypeError {
  const expected = type === "ptr"
    ? "a Tensor or a bigint device address"
    : type === "f32" || type === "f64"
    ? "a number"
    : type === "i32" || type === "u32"
    ? "an integer number"
    : "an integer number or a bigint";
  return new TypeError(
    `Invalid args[${i}]: expected ${expected} for ${type}, got ${describe(value)}`,
  );
}

/** The error for argument `i`, `value`, out of the range of parameter type `type`. */
export function rangeError(i: number, type: ParamType, value: number): RangeError {
  return new RangeError(`Invalid args[${i}]: ${value} is out of range for ${type}`);
}

/** The parameter types a declaration may name. */
export const PARAM_TYPES: ReadonlySet<string> = new Set(Object.keys(PARAM_BYTES));

/**
 * Checks a declaration's parameter list before the driver is asked about the
 * kernel: an array whose every item is one of {@linkcode PARAM_TYPES}, so
 * that a typo is a `TypeError` naming the item rather than a launch buffer
 * laid out wrong.
 *
 * @throws {TypeError} naming `params`, or the first item that is no parameter type
 */
export function checkParamTypes(params: unknown): asserts params is readonly ParamType[] {
  if (!Array.isArray(params)) {
    throw new TypeError(
      `Invalid params: expected an array of parameter types, got ${describe(params)}`,
    );
  }
  params.forEach((type, i) => {
    if (!PARAM_TYPES.has(type)) {
      throw new TypeError(
        `Invalid params[${i}]: expected one of ${[...PARAM_TYPES].join(", ")}, got ${
          describe(type)
        }`,
      );
    }
  });
}

/** Parameters a kernel's image is asked for at most (its 32 KiB of parameters hold 4096 of 8 bytes). */
export const MAX_PARAMS = 4096;

/** Checks declared parameter types against the image's layout, where the driver gave it. */
export function checkAgainstImage(
  name: string,
  params: readonly ParamType[],
  image: { offset: number; size: number }[] | undefined,
): void {
  if (image === undefined) return;
  const sizes = image.map((p) => p.size);
  if (image.length !== params.length) {
    throw new TypeError(
      `Invalid params: kernel "${name}" takes ${image.length} parameter${
        image.length === 1 ? "" : "s"
      } (of ${sizes.join(", ")} bytes), got ${params.length} (${params.join(", ")})`,
    );
  }
  const { offsets } = parameterOffsets(params);
  params.forEach((type, i) => {
    if (PARAM_BYTES[type] !== image[i].size || offsets[i] !== image[i].offset) {
      throw new TypeError(
        `Invalid params[${i}]: kernel "${name}" takes a ${
          image[i].size
        }-byte parameter there, got ${type} (${PARAM_BYTES[type]} bytes)`,
      );
    }
  });
}
