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

let positions = new Uint32Array(0);

/**
 * The positions 0..n-1, as a view of one shared, growing array (no array
 * of positions is built per copy; a view never changes).
 *
 * @example
 * ```ts
 * import { firstPositions } from "./number_list.ts";
 * console.assert(Array.from(firstPositions(3)).join() === "0,1,2");
 * ```
 */
export function firstPositions(n: number): Uint32Array {
  if (positions.length < n) {
    positions = new Uint32Array(Math.max(n, 2 * positions.length));
    for (let k = 0; k < positions.length; k++) positions[k] = k;
  }
  return positions.subarray(0, n);
}
