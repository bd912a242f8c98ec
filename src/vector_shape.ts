/**
 * The shapes of one-dimensional tensors, shared: every output of a
 * TypedArray leaf has the shape `[length]`, made once per length.
 *
 * @module
 */

// Shapes of lengths below SHORT_LENGTHS by index (an array load per leaf,
// where a Map lookup showed in profiles), the others in a bounded Map.
const SHORT_LENGTHS = 4096;
const SHORT_SHAPES: (readonly number[] | undefined)[] = new Array(SHORT_LENGTHS).fill(undefined);
const VECTOR_SHAPES = new Map<number, readonly number[]>();
const MAX_SHARED_SHAPES = 4096;

/**
 * The frozen shape `[length]`, shared by every tensor of that length (no
 * array allocated per output, and none that a caller could change).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { vectorShape } from "./vector_shape.ts";
 * assert.equal(vectorShape(3), vectorShape(3));
 * assert.deepEqual(vectorShape(3), [3]);
 * assert.ok(Object.isFrozen(vectorShape(3)));
 * ```
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
