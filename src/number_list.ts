/**
 * A growable list of numbers in a typed array, borrowed from a free list and
 * returned after use. The per-copy index lists (which leaves go where, the
 * packing offsets) live in these, so a steady stream of copies neither
 * reallocates arrays while it grows them nor leaves them to the GC.
 *
 * @module
 */

/** A growable list of doubles. */
export class NumberList {
  /** The storage; only the first `length` entries are meaningful. */
  data: Float64Array = new Float64Array(1024);
  /** Number of entries. */
  length = 0;

  /** Appends `value`. */
  push(value: number): void {
    if (this.length === this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = value;
  }

  /** The entries as a view (no copy; valid until the list is returned). */
  view(): Float64Array {
    return this.data.subarray(0, this.length);
  }
}

const idle: NumberList[] = [];

/** An empty list, reused when one is free. */
export function borrowList(): NumberList {
  const list = idle.pop() ?? new NumberList();
  list.length = 0;
  return list;
}

/** Gives a list back; the caller must not use it (or its views) again. */
export function returnList(list: NumberList): void {
  if (idle.length < 64) idle.push(list);
}

/**
 * A list of indices that stays implicit while they are 0, 1, 2, ... (the
 * common case: every leaf of a copy goes the same way), and is written out
 * into a borrowed {@linkcode NumberList} from the first other index on.
 * Costs a comparison per index instead of a store.
 *
 * @example
 * ```ts
 * import { IndexList } from "./number_list.ts";
 * import assert from "node:assert/strict";
 * const list = new IndexList();
 * list.push(0);
 * list.push(1);
 * list.push(5);
 * assert.deepEqual(Array.from(list.view()), [0, 1, 5]);
 * assert.equal(list.length, 3);
 * list.release();
 * ```
 */
export class IndexList {
  #listed: NumberList | undefined;
  #count = 0;

  /** Number of indices. */
  get length(): number {
    return this.#listed === undefined ? this.#count : this.#listed.length;
  }

  /** Appends `index`. */
  push(index: number): void {
    if (this.#listed === undefined) {
      if (index === this.#count) {
        this.#count++;
        return;
      }
      const listed = this.#listed = borrowList();
      for (let k = 0; k < this.#count; k++) listed.push(k);
    }
    this.#listed.push(index);
  }

  /** The indices (a view; valid until the list is released). */
  view(): ArrayLike<number> {
    return this.#listed === undefined ? firstPositions(this.#count) : this.#listed.view();
  }

  /** Returns the borrowed storage, if any; the list is empty afterwards. */
  release(): void {
    if (this.#listed !== undefined) returnList(this.#listed);
    this.#listed = undefined;
    this.#count = 0;
  }
}

let positions = new Uint32Array(0);
// Views of `positions` by their length, below FEW (a view is an object: a
// copy asks for a few lengths, the same each step, and got a new one each
// time). A view made before `positions` grew views the old array, whose
// contents are the same.
const FEW = 4096;
const fewViews: (Uint32Array | undefined)[] = [];

/**
 * The positions 0..n-1, as a view of one shared, growing array (no array
 * of positions is built per copy; a view never changes).
 *
 * @example
 * ```ts
 * import { firstPositions } from "./number_list.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(Array.from(firstPositions(3)), [0, 1, 2]);
 * ```
 */
export function firstPositions(n: number): Uint32Array {
  if (positions.length < n) {
    positions = new Uint32Array(Math.max(n, 2 * positions.length));
    for (let k = 0; k < positions.length; k++) positions[k] = k;
  }
  if (n >= FEW) return positions.subarray(0, n);
  return fewViews[n] ??= positions.subarray(0, n);
}
