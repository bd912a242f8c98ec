/**
 * Compiled copies of plain objects, one per set of keys.
 *
 * A batch's objects come in few shapes (every sample has the same keys,
 * every camera the same keys), but a generic walk reads and writes them
 * with keyed accesses that V8 cannot specialise (megamorphic) and clones
 * them on its slow path. For each key list seen, a small function is
 * compiled once that reads the keys by name and builds the output with an
 * object literal: monomorphic loads, one allocation of the final shape.
 * Key lists with `__proto__`, more than {@linkcode MAX_SHAPE_KEYS} keys, or
 * past {@linkcode MAX_SHAPES} distinct lists take the generic path.
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
/** At most this many shapes are compiled per prototype kind; later ones go generic. */
export const MAX_SHAPES = 1024;

const byKeys = [new Map<string, Shape>(), new Map<string, Shape>()];

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
  const map = byKeys[nullPrototype ? 1 : 0];
  const id = keys.join("\u0000");
  let shape = map.get(id);
  if (shape === undefined) {
    if (map.size >= MAX_SHAPES || keys.includes("__proto__")) return undefined;
    shape = { keys: keys.slice(), nullPrototype, copy: compile(keys, nullPrototype, onError) };
    map.set(id, shape);
  }
  return shape;
}

/** Whether `keys` are exactly the shape's keys (interned strings: cheap). */
export function sameKeys(keys: readonly string[], nullPrototype: boolean, shape: Shape): boolean {
  if (shape.nullPrototype !== nullPrototype) return false;
  const own = shape.keys;
  if (keys.length !== own.length) return false;
  for (let i = 0; i < keys.length; i++) if (keys[i] !== own[i]) return false;
  return true;
}

function compile(
  keys: readonly string[],
  nullPrototype: boolean,
  onError: (error: unknown, key: string) => never,
): ShapeCopy {
  const names = keys.map((key) => JSON.stringify(key));
  const lines = [
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
  ];
  return new Function("keys", "onError", lines.join("\n"))(keys.slice(), onError) as ShapeCopy;
}
