/**
 * A leaf's fields, whichever its kind: the one reading of a tensor leaf
 * that both an ordinary copy (route.ts, which makes the output of each leaf
 * from them) and a copy into an earlier result (transfer/into/leaves.ts,
 * which compares them with the tensor the leaf replaces) rely on. A
 * TypedArray reads as the CPU tensor that would wrap it: the dtype of its
 * built-in class (by its internal type name, never its `constructor`), the
 * shape `[length]`, the host arena its buffer is memory of. Reading both in
 * one place keeps the two paths from disagreeing on what a leaf is (a
 * subclass, a `Uint8ClampedArray`, a view into an arena). The route
 * reads a TypedArray leaf from the class code the walk's check already
 * read (`Route.add`; a call and a second read of the class saved per
 * leaf), and tests/route_test.ts holds it to this reading on hostile views.
 *
 * The walk's refusals (a disposed tensor, a detached view) are not read
 * here: they depend on the tensor's data at the time it is read
 * (`tensorInternals.walkData`), and each path names them in its own errors.
 *
 * @module
 */

import { arenaOf } from "./arena_index.ts";
import { arrayCodeOf, CODE_DTYPE } from "./array_code.ts";
import { CPU } from "./device.ts";
import { type TypedArray, viewByteLength, viewLength } from "./dtype.ts";
import { Tensor, type TensorFields, tensorFields, tensorInternals } from "./tensor.ts";
import { vectorShape } from "./vector_shape.ts";

/** A leaf's fields: those of the tensor it is or stands for (its class code included). */
export type LeafFields = TensorFields;

/**
 * A {@linkcode LeafFields} to read leaves into, reused by its owner (no
 * object per leaf: the route reads every leaf of every copy).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { NO_CODE } from "./array_code.ts";
 * import { leafFields } from "./leaf_fields.ts";
 * assert.equal(leafFields().code, NO_CODE);
 * ```
 */
export function leafFields(): LeafFields {
  return tensorFields();
}

/**
 * Reads `leaf`'s fields into `out`: a `Tensor`'s own; a TypedArray's as
 * the CPU tensor that would wrap it (no storage; `arena` where its buffer
 * is a host arena's memory). A view of a class the library does not know
 * reads with `code` {@linkcode NO_CODE} and an undefined dtype, which
 * matches no tensor's.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { leafFields, readLeaf } from "./leaf_fields.ts";
 * const fields = leafFields();
 * readLeaf(new Uint8ClampedArray(3), fields);
 * assert.deepEqual([fields.device, fields.dtype, fields.shape, fields.byteLength], [-1, "uint8", [3], 3]);
 * ```
 */
export function readLeaf(leaf: TypedArray | Tensor, out: LeafFields): void {
  if (leaf instanceof Tensor) {
    tensorInternals.read(leaf, out);
    return;
  }
  const code = arrayCodeOf(leaf);
  out.code = code;
  out.layout = undefined;
  out.device = CPU;
  out.dtype = CODE_DTYPE[code];
  out.shape = vectorShape(viewLength(leaf));
  out.byteLength = viewByteLength(leaf);
  out.arena = arenaOf(leaf);
  out.storage = undefined;
}
