/**
 * A frozen structure is read once: copies into a result of data whose
 * containers (arrays and plain objects) are all frozen, with plain values
 * only (no getters or setters), skip the data's structure check once it
 * passed for the same root; a frozen result likewise skips the check that
 * it still holds its tensors.
 *
 * Why that is sound: a frozen container can never gain, lose, reorder or
 * change a key or a value, nor change its prototype, and a data property
 * has no code to run; so the same root has the same containers, keys and
 * leaves (the same `Tensor` and TypedArray objects) forever. What can still
 * change is the leaves' bytes and state (a disposed tensor, a detached
 * buffer), which known.ts checks at every copy as before, and
 * Object.prototype, whose enumerable keys the generic walk would read: the
 * copy checks it has none. The result's tensors' holds are checked as
 * before (holds.ts).
 *
 * Bounded: the deep check runs once per root that came twice in a row (a
 * root met once, a batch built per step, costs one comparison), and once
 * per result; a root whose check failed is not checked again. A structure
 * frozen after its first copies is taken from then on.
 *
 * @module
 */

import type { ShapeNode } from "../../reuse/into_shape.ts";

/** What a result's record keeps for the frozen path. */
export interface FrozenReads {
  /**
   * The data root the columns were last filled from by a check that passed,
   * checked deep-frozen before that check: its structure is not read again.
   */
  data: unknown;
  /** The values that check passed through. */
  passes: number;
  /** The root of the last read whose check passed (frozen or not). */
  seen: unknown;
  /** The last root found deep-frozen, and the last found not to be. */
  frozen: unknown;
  notFrozen: unknown;
  /** Whether the result is deep-frozen and its result-only check passed since. */
  resultFrozen: boolean;
  /** Whether the result was checked deep-frozen (once: true or false for good). */
  resultTried: boolean;
}

/**
 * Reads that skipped the data's structure check (`structure`), and of
 * those, the ones that skipped the result's too (`result`) (for tests and
 * benchmarks).
 */
export const frozenCounts: { structure: number; result: number } = { structure: 0, result: 0 };

/** A record's frozen-path state: nothing known yet. */
export function frozenReads(): FrozenReads {
  return {
    data: undefined,
    passes: 0,
    seen: undefined,
    frozen: undefined,
    notFrozen: undefined,
    resultFrozen: false,
    resultTried: false,
  };
}

/**
 * Whether `value` is frozen along `node`: every array and plain object
 * where the structure has one is frozen, and each of their values the
 * structure reads is a data property. (Keys, lengths and leaves are the
 * structure check's to compare; a Map, whose entries can always change,
 * is never frozen.)
 */
export function frozenAlong(node: ShapeNode, value: unknown): boolean {
  switch (node.kind) {
    case "leaf":
    case "pass":
      return true;
    case "map":
      return false;
    case "array": {
      if (!Array.isArray(value) || !Object.isFrozen(value)) return false;
      const { items } = node;
      for (let i = 0; i < items.length; i++) {
        const item = dataValue(value, String(i));
        if (item === NOT_DATA || !frozenAlong(items[i], item)) return false;
      }
      return true;
    }
    case "object": {
      if (typeof value !== "object" || value === null || !Object.isFrozen(value)) return false;
      const { keys, values } = node;
      for (let i = 0; i < keys.length; i++) {
        const item = dataValue(value, keys[i]);
        if (item === NOT_DATA || !frozenAlong(values[i], item)) return false;
      }
      return true;
    }
  }
}

const NOT_DATA: unique symbol = Symbol("not a data property");

/** The own data property `key` of `container`, or NOT_DATA (missing, or a getter or setter). */
function dataValue(container: object, key: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(container, key);
  return descriptor !== undefined && "value" in descriptor ? descriptor.value : NOT_DATA;
}
