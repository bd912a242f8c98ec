/**
 * Freezing a batch's containers for copies into a result: a copy into a
 * result (`startCopy(data, "cuda:0", { into })`) of the same frozen data
 * does not read its structure again, and a frozen result is not read
 * again either (the frozen path, docs/ARCHITECTURE.md). Only the arrays
 * and plain objects are frozen; the leaves (tensors and TypedArrays) keep
 * taking new bytes, as a batch built in a `hostArena` does step after step.
 *
 * @module
 */

/**
 * Freezes every array and plain object of `value`, innermost first, and
 * returns `value`. Leaves and other objects are left as they are.
 *
 * @example A batch whose structure never changes, copied into its last result
 * ```ts
 * import assert from "node:assert/strict";
 * import { freezeContainers } from "./freeze_containers.ts";
 * const batch = freezeContainers({ boxes: [new Float32Array(4)], id: 3 });
 * assert.ok(Object.isFrozen(batch) && Object.isFrozen(batch.boxes));
 * batch.boxes[0][0] = 1; // the leaves still take new values
 * assert.equal(batch.boxes[0][0], 1);
 * ```
 */
export function freezeContainers<T>(value: T): T {
  if (
    Array.isArray(value) ||
    (typeof value === "object" && value !== null &&
      Object.getPrototypeOf(value) === Object.prototype)
  ) {
    for (const item of Object.values(value as object)) freezeContainers(item);
    Object.freeze(value);
  }
  return value;
}
