/**
 * `disposeAll`: release every tensor in a nested structure.
 *
 * @module
 */

import { Tensor } from "./tensor.ts";
import { isPlainObject } from "./traverse.ts";

/**
 * Disposes every {@linkcode Tensor} found in a nested structure of arrays,
 * plain objects and Maps (the containers `startCopy` walks). Other values
 * are left alone; cycles are tolerated.
 *
 * @param value a tensor or a structure holding tensors
 *
 * @example Releasing a batch after use
 * ```ts
 * import { disposeAll, Tensor } from "@mtc/core";
 * const batch = { boxes: Tensor.from(new Float32Array(4)), ids: [Tensor.from(new Int32Array(2))] };
 * disposeAll(batch);
 * console.assert(batch.boxes.disposed && batch.ids[0].disposed);
 * ```
 */
export function disposeAll(value: unknown): void {
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item instanceof Tensor) {
      item.dispose();
    } else if (typeof item === "object" && item !== null && !seen.has(item)) {
      seen.add(item);
      if (Array.isArray(item)) {
        for (const child of item) stack.push(child);
      } else if (item instanceof Map) {
        for (const child of item.values()) stack.push(child);
      } else if (isPlainObject(item)) {
        for (const key of Object.keys(item)) {
          stack.push((item as Record<string, unknown>)[key]);
        }
      }
    }
  }
}
