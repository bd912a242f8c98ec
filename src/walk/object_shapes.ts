/**
 * Compiled copies of plain objects, one per set of keys.
 *
 * A batch's objects come in few shapes (every sample has the same keys,
 * every camera the same keys), but a generic walk reads and writes them
 * with keyed accesses that V8 cannot specialise (megamorphic) and clones
 * them on its slow path. For each key list seen twice, a small function is
 * compiled that reads the keys by name and builds the output with an
 * object literal: monomorphic loads, one allocation of the final shape.
 *
 * What is compiled stays: V8 keeps the code of every distinct `new
 * Function` source for the life of the process (its compilation cache), so
 * compiling is bounded, not only the shapes kept. A key list is compiled
 * the second time it is seen (keys made per step, such as sample ids, are
 * seen once and never compiled); lists with `__proto__`, more than
 * {@linkcode MAX_SHAPE_KEYS} keys or a key longer than
 * {@linkcode MAX_SHAPE_KEY_LENGTH}, and every list past
 * {@linkcode MAX_SHAPES} shapes or {@linkcode MAX_SHAPE_SOURCE} characters
 * of generated code, take the generic path.
 *
 * @module
 */

/** Visits one child (the walk's `visit`, bound to its state). */
export type VisitChild = (
  value: unknown,
  depth: number,
  ancestors: object[],
  sink: unknown,
) => unknown;

/** Copies one object of the shape, visiting each value. */
export type ShapeCopy = (
  input: Record<string, unknown>,
  visit: VisitChild,
  depth: number,
  ancestors: object[],
  sink: unknown,
) => Record<string, unknown>;

/** A compiled shape: its keys in `Object.keys` order and the copy. */
export interface Shape {
  readonly keys: readonly string[];
  readonly nullPrototype: boolean;
  readonly copy: ShapeCopy;
}

/** Objects with more keys than this are copied generically. */
export const MAX_SHAPE_KEYS = 256;
/** Objects with a key longer than this are copied generically (the key would be in the code twice). */
export const MAX_SHAPE_KEY_LENGTH = 256;
/** At most this many shapes are compiled in a process; later ones go generic. */
export const MAX_SHAPES = 1024;
/** At most this many characters of code are generated for shapes in a process. */
export const MAX_SHAPE_SOURCE = 2 * 1024 * 1024;
/**
 * Key lists seen once that are remembered (to compile the second
 * sighting), and their characters; past either, they are forgotten.
 */
const MAX_SEEN_ONCE = 4096;
const MAX_SEEN_ONCE_CHARS = 1024 * 1024;

/**
 * The shapes by their keys joined with `"\u0000"` (a key may contain it:
 * a hit is compared with the keys), one map per prototype kind.
 */
const byKeys = [new Map<string, Shape>(), new Map<string, Shape>()];
/** Joined key lists seen once, not compiled yet, one set per prototype kind. */
const seenOnce = [new Set<string>(), new Set<string>()];
let seenOnceChars = 0;
let compiled = 0;
let sourceChars = 0;

/**
 * The compiled copy for objects with exactly `keys` (from `Object.keys`) and
 * a null prototype or not, or undefined where the generic path must run.
 * `onError(error, key)` is called with a child's error and the key it was
 * under, and must rethrow.
 */
export function shapeOf(
  keys: readonly string[],
  nullPrototype: boolean,
  onError: (error: unknown, key: string) => never,
): Shape | undefined {
  if (keys.length > MAX_SHAPE_KEYS) return undefined;
  // Before the keys are joined: a key of 50 million characters costs nothing here.
  for (let i = 0; i < keys.length; i++) if (keys[i].length > MAX_SHAPE_KEY_LENGTH) return undefined;
  const map = byKeys[nullPrototype ? 1 : 0];
  const id = keys.join("\u0000");
  const shape = map.get(id);
  if (shape !== undefined) return keysMatchShape(keys, nullPrototype, shape) ? shape : undefined;
  if (compiled >= MAX_SHAPES || sourceChars >= MAX_SHAPE_SOURCE) return undefined;
  if (keys.includes("__proto__")) return undefined;
  const seen = seenOnce[nullPrototype ? 1 : 0];
  if (!seen.has(id)) {
    if (seen.size >= MAX_SEEN_ONCE || seenOnceChars >= MAX_SEEN_ONCE_CHARS) {
      for (const set of seenOnce) set.clear();
      seenOnceChars = 0;
    }
    seen.add(id);
    seenOnceChars += id.length;
    return undefined;
  }
  seen.delete(id);
  const source = shapeSource(keys, nullPrototype);
  if (sourceChars + source.length > MAX_SHAPE_SOURCE) {
    // The budget is spent (what is left would not be worth building sources for).
    sourceChars = MAX_SHAPE_SOURCE;
    return undefined;
  }
  sourceChars += source.length;
  compiled++;
  const own = keys.slice();
  const made: Shape = {
    keys: own,
    nullPrototype,
    copy: new Function("keys", "onError", source)(own, onError) as ShapeCopy,
  };
  map.set(id, made);
  return made;
}

/** Depths with a remembered shape (deeper objects look theirs up by keys). */
export const SHAPE_DEPTHS = 64;
const lastShapes: (Shape | undefined)[] = new Array(SHAPE_DEPTHS);

/**
 * The compiled copy for a plain object with `names` at `depth` (below
 * {@linkcode SHAPE_DEPTHS}): objects at one depth of a batch mostly share
 * their keys, so the last shape seen there is tried first (a few pointer
 * comparisons). `onError` as for {@linkcode shapeOf}.
 */
export function shapeAt(
  depth: number,
  names: string[],
  nullPrototype: boolean,
  onError: (error: unknown, key: string) => never,
): Shape | undefined {
  const last = lastShapes[depth];
  if (last !== undefined && keysMatchShape(names, nullPrototype, last)) return last;
  const shape = shapeOf(names, nullPrototype, onError);
  if (shape !== undefined) lastShapes[depth] = shape;
  return shape;
}

/** Whether `keys` are exactly the shape's keys (interned strings: cheap). */
export function keysMatchShape(
  keys: readonly string[],
  nullPrototype: boolean,
  shape: Shape,
): boolean {
  if (shape.nullPrototype !== nullPrototype) return false;
  const own = shape.keys;
  if (keys.length !== own.length) return false;
  for (let i = 0; i < keys.length; i++) if (keys[i] !== own[i]) return false;
  return true;
}

/** How many shapes were compiled, and how much code: for tests and diagnostics. */
export function shapeStats(): { compiled: number; sourceChars: number } {
  return { compiled, sourceChars };
}

/**
 * Forgets every shape and the budgets spent (for tests: the compiled code
 * itself stays in V8's cache).
 */
export function forgetShapes(): void {
  for (const map of byKeys) map.clear();
  for (const set of seenOnce) set.clear();
  lastShapes.fill(undefined);
  compiled = sourceChars = seenOnceChars = 0;
}

function shapeSource(keys: readonly string[], nullPrototype: boolean): string {
  const names = keys.map((key) => JSON.stringify(key));
  return [
    `"use strict";`,
    `return function copy(input, visit, depth, ancestors, sink) {`,
    // Every value is read once, before any is visited (as a spread would).
    ...names.map((name, i) => `  const v${i} = input[${name}];`),
    `  let at = 0;`,
    `  try {`,
    ...names.map((_, i) =>
      `    at = ${i}; const o${i} = v${i} === null || typeof v${i} !== "object" ? v${i} : visit(v${i}, depth, ancestors, sink);`
    ),
    `    return { ${nullPrototype ? "__proto__: null, " : ""}${
      names.map((name, i) => `${name}: o${i}`).join(", ")
    } };`,
    `  } catch (error) {`,
    `    onError(error, keys[at]);`,
    `  }`,
    `};`,
  ].join("\n");
}
