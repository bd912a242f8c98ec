/**
 * What a view of a host arena is, and the checks on `hostArena`'s
 * arguments: the alignment every view starts at, the TypedArray classes
 * `array()` takes, and the sizes and lengths it is given.
 *
 * Apart from `HostArena` (`host_arena.ts`) because a class passed in is the
 * user's code: what it may be and what it must have made are rules of their
 * own, tested here one by one, without memory to carve. (What a class made
is checked where it is made, in `array()`.)
 *
 * @module
 */

import { shown } from "../shown.ts";

/** Every view an arena hands out starts at a multiple of this. */
export const ARENA_ALIGNMENT = 16;

/** A TypedArray class, as `array()` takes it. */
export interface ArrayClass<A extends ArrayBufferView> {
  /** A view of `length` elements at `byteOffset`. */
  new (buffer: ArrayBuffer, byteOffset: number, length: number): A;
  /** Element size. */
  readonly BYTES_PER_ELEMENT: number;
}

/** The element sizes of TypedArray classes. */
const ELEMENT_SIZES: ReadonlySet<unknown> = new Set([1, 2, 4, 8]);

/** How an error message names a class argument. */
function className(cls: unknown): string {
  if (typeof cls === "function") return cls.name ? `class ${cls.name}` : "an anonymous class";
  return cls === null ? "null" : typeof cls;
}

/**
 * Checks a size argument of `hostArena` (`name`: which one) against `min`.
 *
 * @throws {TypeError} for a non-number
 * @throws {RangeError} for a number that is not a whole number >= `min`
 */
export function checkCount(value: unknown, name: string, min: number): void {
  if (typeof value !== "number") {
    throw new TypeError(`Invalid hostArena ${name}: expected a number, got ${shown(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(
      `Invalid hostArena ${name}: expected a whole number >= ${min}, got ${shown(value)}`,
    );
  }
}

/**
 * The element size of `cls`, checked to be a TypedArray class's before
 * anything is carved.
 *
 * @throws {TypeError} when its `BYTES_PER_ELEMENT` is not 1, 2, 4 or 8 (as
 * for `DataView`, or a value that is no class)
 */
export function elementSize(cls: ArrayClass<ArrayBufferView>): number {
  const size = typeof cls === "function" ? cls.BYTES_PER_ELEMENT : undefined;
  if (!ELEMENT_SIZES.has(size)) {
    throw new TypeError(
      `Invalid hostArena class: expected a TypedArray class (BYTES_PER_ELEMENT 1, 2, 4 or 8), ` +
        `got ${className(cls)}`,
    );
  }
  return size as number;
}

/** The error for a view of `bytes` that does not fit: `used` of `arenaBytes` are handed out. */
export function noRoom(bytes: number, used: number, arenaBytes: number): RangeError {
  return new RangeError(
    `Cannot carve ${bytes} more bytes from the host arena: they do not fit (${used} of ` +
      `${arenaBytes} used); make the arena larger or reset() it`,
  );
}

/**
 * The error for a class of the user's that called back into the arena
 * (`array()`, `reset()`, `dispose()`) while making its view: it handed out
 * or freed those bytes meanwhile.
 */
export function classUsedArena(cls: unknown): TypeError {
  return new TypeError(
    `Invalid hostArena class: ${className(cls)} used the arena while it was making a view of it`,
  );
}

/** The error for a class that made something other than a view of `length` elements there. */
export function notAView(cls: unknown, length: number): TypeError {
  return new TypeError(
    `Invalid hostArena class: expected a TypedArray class, got ${className(cls)}, ` +
      `which made something else than a view of ${length} elements`,
  );
}
