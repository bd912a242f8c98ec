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
 * change is checked at every copy as before: the leaves' bytes and state (a
 * disposed tensor, a detached buffer: known.ts), the values passed through
 * (their prototypes), the result's tensors' holds (holds.ts); and while
 * Object.prototype has enumerable keys, the compiled check leaves data to
 * the generic one, and so does this path.
 *
 * Bounded: the deep check runs when a root comes a second time in a row,
 * once for that run of copies of it (a batch built per step costs one
 * comparison), and once per result: a root must be frozen before its
 * second copy in a row, a result before the copy after. Proxies and values
 * passed through are not fixed by freezing: see below and `frozenPasses`
 * in leaves.ts.
 *
 * @module
 */

import type { CompiledCheck } from "../../reuse/into_code.ts";
import type { ShapeNode } from "../../reuse/into_shape.ts";

/** What a result's record keeps for the frozen path. */
export interface FrozenReads {
  /**
   * The data root the columns were last filled from by a check that passed,
   * found deep-frozen before that check: its structure is not read again.
   */
  data: unknown;
  /** The values that check passed through. */
  passes: number;
  /** The root of the last read whose check passed (frozen or not). */
  seen: unknown;
  /** That root, once checked deep-frozen (whatever the answer: once a run of copies of it). */
  decided: unknown;
  /**
   * The result-only check, compiled once a root is found deep-frozen
   * (undefined: not yet; null: past the compiled code's budget, no path).
   */
  checkResult: CompiledCheck | null | undefined;
  /** Whether the result is deep-frozen and its result-only check passed since. */
  resultFrozen: boolean;
  /** Whether the result was checked deep-frozen (once: the answer stands for good). */
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
    decided: undefined,
    checkResult: undefined,
    resultFrozen: false,
    resultTried: false,
  };
}

// Proxies are never frozen here: their traps run at every read, throw once
// revoked, and may list keys in another order, while a target's being
// frozen fixes only the keys and values they report. JavaScript cannot
// tell a proxy; Node's `util.types.isProxy` can, in Deno too. Imported at
// the first copy into a result (record.ts), not with the package: importing
// node:util costs 6–8 ms, a fifth of the package's own import, which every
// user would pay; until it is loaded, nothing is frozen.
let isProxy: ((value: unknown) => boolean) | undefined;
let loading: Promise<void> | undefined;

// The built-ins the checks use, as the package found them (a user's
// replacement of Object.isFrozen must not make mutable data look frozen).
const { isFrozen, getOwnPropertyDescriptor } = Object;
const { isArray } = Array;

/**
 * Whether the frozen path can tell proxies yet; starts loading what tells
 * them the first time it is asked.
 */
export function frozenPathReady(): boolean {
  loading ??= import("node:util").then((util) => {
    isProxy = util.types.isProxy;
  }).catch(() => {});
  return isProxy !== undefined;
}

/** Resolves once the frozen path can tell proxies (for tests and benchmarks). */
export async function whenFrozenPathReady(): Promise<void> {
  frozenPathReady();
  await loading;
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
      // (Proxies first: isFrozen and isArray would run or pass through their traps.)
      if (!ordinary(value) || !isArray(value) || !isFrozen(value)) return false;
      const { items } = node;
      for (let i = 0; i < items.length; i++) {
        const item = dataValue(value, String(i));
        if (item === NOT_DATA || !frozenAlong(items[i], item)) return false;
      }
      return true;
    }
    case "object": {
      if (!ordinary(value) || !isFrozen(value)) return false;
      const { keys, values } = node;
      for (let i = 0; i < keys.length; i++) {
        const item = dataValue(value, keys[i]);
        if (item === NOT_DATA || !frozenAlong(values[i], item)) return false;
      }
      return true;
    }
  }
}

/** An object that is no proxy (false too while proxies cannot be told: see above). */
function ordinary(value: unknown): value is object {
  return typeof value === "object" && value !== null && isProxy !== undefined && !isProxy(value);
}

const NOT_DATA: unique symbol = Symbol("not a data property");

/** The own data property `key` of `container`, or NOT_DATA (missing, or a getter or setter). */
function dataValue(container: object, key: string): unknown {
  const descriptor = getOwnPropertyDescriptor(container, key);
  return descriptor !== undefined && "value" in descriptor ? descriptor.value : NOT_DATA;
}
