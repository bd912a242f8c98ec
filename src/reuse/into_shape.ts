/**
 * The structure of a result that copies write into (the `into` option),
 * and the check that a copy's data has it, exactly.
 *
 * The structure is read once from the result itself (its containers, its
 * tensors in the walk's order: arrays by index, plain objects by their own
 * enumerable string keys, Maps by entry), each tensor checked by the
 * caller.
 * {@linkcode matchShape} walks a copy's data and the result side by side:
 * the same containers, the same keys in order, the same lengths, and at
 * each leaf the tensor the structure recorded; it fills the columns the
 * copy reads (the data's leaf at each position, the values passed through
 * and where they go) and throws, naming the path, where they differ.
 * `into_code.ts` compiles the same check for a structure seen again.
 *
 * @module
 */

import { formatPath, pathKey } from "../walk/errors.ts";
import { shown } from "../shown.ts";
import { Tensor } from "../tensor.ts";

/** A node of a result's structure. */
export type ShapeNode =
  | { readonly kind: "leaf" }
  | { readonly kind: "pass" }
  | {
    readonly kind: "array";
    readonly items: readonly ShapeNode[];
    /** Whether every item has the same structure (compiled as a loop). */
    readonly same: boolean;
  }
  | {
    readonly kind: "object";
    readonly nullPrototype: boolean;
    readonly keys: readonly string[];
    readonly values: readonly ShapeNode[];
  }
  | {
    readonly kind: "map";
    readonly keys: readonly unknown[];
    readonly values: readonly ShapeNode[];
  };

/** A result's structure and its tensors, in the walk's order. */
export interface IntoShape {
  readonly root: ShapeNode;
  readonly tensors: readonly Tensor[];
  /** Values passed through (slots that are neither containers nor tensors). */
  readonly passes: number;
}

/** What a check of a copy's data fills in (reused from copy to copy). */
export interface MatchColumns {
  /** The data's leaf at each leaf position. */
  sources: unknown[];
  /** The result's container, key and the data's value of each value passed through. */
  passContainers: object[];
  passKeys: unknown[];
  passValues: unknown[];
}

/** Checks the data's leaf at position `n` (found at `path`); throws where it does not fit. */
export type LeafCheck = (n: number, leaf: unknown, path: () => string) => void;

const LEAF: ShapeNode = Object.freeze({ kind: "leaf" });
const PASS: ShapeNode = Object.freeze({ kind: "pass" });

/**
 * The structure of `result`; a string saying what is wrong with it where
 * it cannot be copied into: a tensor that `accept` refuses (its answer says
 * why), a tensor met twice, a cycle, or no tensor at all.
 */
export function buildShape(
  result: object,
  accept: (tensor: Tensor) => string | undefined = () => undefined,
): IntoShape | string {
  const tensors: Tensor[] = [];
  let passes = 0;
  const ancestors = new Set<object>();
  const seen = new Set<Tensor>();
  let problem: string | undefined;
  const visit = (value: unknown, path: (string | number)[]): ShapeNode => {
    if (problem !== undefined) return PASS;
    if (value instanceof Tensor) {
      const refused = seen.has(value) ? "is a tensor met before" : accept(value);
      if (refused !== undefined) problem = `${formatPath(path)} ${refused}`;
      seen.add(value);
      tensors.push(value);
      return LEAF;
    }
    if (typeof value !== "object" || value === null || isLeafArray(value)) {
      passes++;
      return PASS;
    }
    const kind = containerOf(value);
    if (kind === NOT_WALKED) {
      passes++;
      return PASS;
    }
    if (ancestors.has(value)) {
      problem = `${formatPath(path)} is a cycle`;
      return PASS;
    }
    ancestors.add(value);
    let node: ShapeNode;
    if (kind === ARRAY) {
      const array = value as unknown[];
      const items: ShapeNode[] = [];
      for (let i = 0; i < array.length; i++) items.push(visit(array[i], [...path, i]));
      node = { kind: "array", items, same: items.every((item) => sameShape(item, items[0])) };
    } else if (kind === MAP) {
      const keys: unknown[] = [];
      const values: ShapeNode[] = [];
      for (const [key, item] of value as Map<unknown, unknown>) {
        keys.push(key);
        values.push(visit(item, [...path, pathKey(key)]));
      }
      node = { kind: "map", keys, values };
    } else {
      const keys = Object.keys(value);
      const values = keys.map((key) =>
        visit((value as Record<string, unknown>)[key], [...path, key])
      );
      node = {
        kind: "object",
        nullPrototype: Object.getPrototypeOf(value) === null,
        keys,
        values,
      };
    }
    ancestors.delete(value);
    return node;
  };
  const root = visit(result, []);
  if (problem !== undefined) return problem;
  if (tensors.length === 0) return "it holds no tensor";
  return { root, tensors, passes };
}

/** Whether two nodes describe the same structure. */
export function sameShape(a: ShapeNode, b: ShapeNode): boolean {
  if (a === b) return true;
  if (a.kind !== b.kind) return false;
  switch (a.kind) {
    case "leaf":
    case "pass":
      return true;
    case "array": {
      const other = b as typeof a;
      return a.items.length === other.items.length &&
        a.items.every((item, i) => sameShape(item, other.items[i]));
    }
    case "object": {
      const other = b as typeof a;
      return a.nullPrototype === other.nullPrototype && a.keys.length === other.keys.length &&
        a.keys.every((key, i) => key === other.keys[i]) &&
        a.values.every((value, i) => sameShape(value, other.values[i]));
    }
    case "map": {
      const other = b as typeof a;
      return a.keys.length === other.keys.length &&
        a.keys.every((key, i) => Object.is(key, other.keys[i])) &&
        a.values.every((value, i) => sameShape(value, other.values[i]));
    }
  }
}

/**
 * Walks `data` along `shape`, with `result` beside it: fills `columns` and
 * checks each leaf with `checkLeaf`. Returns the number of values passed
 * through.
 *
 * @throws {TypeError} where `data` differs from the structure, naming the
 * path ("Invalid option into: expected …, got … at $.path")
 * @throws {Error} where `result` no longer holds the tensors it had
 */
export function matchShape(
  shape: IntoShape,
  data: unknown,
  result: object,
  columns: MatchColumns,
  checkLeaf: LeafCheck,
): number {
  const { tensors } = shape;
  let n = 0;
  let m = 0;
  const path: (string | number)[] = [];
  const where = () => formatPath(path);
  const pass = (container: object, key: unknown, value: unknown) => {
    if (isWalked(value)) {
      throw mismatch(
        `a value passed through (no tensor, array, plain object or Map)`,
        value,
        where(),
      );
    }
    columns.passContainers[m] = container;
    columns.passKeys[m] = key;
    columns.passValues[m++] = value;
  };
  const visit = (node: ShapeNode, value: unknown, mine: unknown): void => {
    switch (node.kind) {
      case "leaf":
        if (mine !== tensors[n]) {
          throw new Error(
            `Cannot copy into this result: ${where()} no longer holds the tensor the copy made there`,
          );
        }
        checkLeaf(n, value, where);
        columns.sources[n++] = value;
        return;
      case "pass":
        throw new Error("unreachable: a value passed through is visited by its container");
      case "array": {
        const length = node.items.length;
        if (!Array.isArray(value)) throw mismatch(`an array of ${length} elements`, value, where());
        if (value.length !== length) {
          throw mismatch(`an array of ${length} elements`, value, where(), `${value.length}`);
        }
        const own = mine as unknown[];
        for (let i = 0; i < length; i++) {
          path.push(i);
          child(node.items[i], value, own, i, value[i], own[i]);
          path.pop();
        }
        return;
      }
      case "object": {
        const { keys, values, nullPrototype } = node;
        const proto = value !== null && typeof value === "object"
          ? Object.getPrototypeOf(value)
          : undefined;
        const expected = nullPrototype ? "a plain object with a null prototype" : "a plain object";
        if (proto !== (nullPrototype ? null : Object.prototype) || Array.isArray(value)) {
          throw mismatch(expected, value, where());
        }
        const found = Object.keys(value as object);
        if (found.length !== keys.length || found.some((key, i) => key !== keys[i])) {
          throw new TypeError(
            `Invalid option into: expected ${expected} with keys ${
              JSON.stringify(keys)
            } at ${where()}, got keys ${JSON.stringify(found)}`,
          );
        }
        const own = mine as Record<string, unknown>;
        const input = value as Record<string, unknown>;
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i];
          path.push(key);
          child(values[i], own, own, key, input[key], own[key]);
          path.pop();
        }
        return;
      }
      case "map": {
        const { keys, values } = node;
        if (!(value instanceof Map)) {
          throw mismatch(`a Map of ${keys.length} entries`, value, where());
        }
        if (value.size !== keys.length) {
          throw mismatch(`a Map of ${keys.length} entries`, value, where(), `${value.size}`);
        }
        const own = mine as Map<unknown, unknown>;
        let i = 0;
        for (const [key, item] of value) {
          if (!Object.is(key, keys[i]) && !(key === 0 && keys[i] === 0)) {
            throw new TypeError(
              `Invalid option into: expected the key ${
                shown(keys[i])
              } at entry ${i} of the Map at ${where()}, got ${shown(key)}`,
            );
          }
          path.push(pathKey(key));
          child(values[i], own, own, key, item, own.get(key));
          path.pop();
          i++;
        }
        return;
      }
    }
  };
  const child = (
    node: ShapeNode,
    _parent: unknown,
    container: object,
    key: unknown,
    value: unknown,
    mine: unknown,
  ) => {
    if (node.kind === "pass") pass(container, key, value);
    else visit(node, value, mine);
  };
  if (shape.root.kind === "pass") {
    throw new Error("Cannot copy into this result: it holds no tensor");
  }
  visit(shape.root, data, result);
  return m;
}

/** The error for `value` found where `expected` was (`size`: its length, where that differs). */
function mismatch(expected: string, value: unknown, path: string, size?: string): TypeError {
  const got = size !== undefined
    ? `${Array.isArray(value) ? "an array" : "a Map"} of ${size}`
    : describe(value);
  return new TypeError(`Invalid option into: expected ${expected} at ${path}, got ${got}`);
}

/** A value as an error message names it. */
export function describe(value: unknown): string {
  if (value instanceof Tensor) {
    return `a ${value.dtype} tensor of shape [${value.shape.join(", ")}] on ${value.device}`;
  }
  if (isLeafArray(value)) return `a ${value.constructor.name} of ${value.length} elements`;
  if (Array.isArray(value)) return `an array of ${value.length} elements`;
  if (value instanceof Map) return `a Map of ${value.size} entries`;
  if (value === null || typeof value !== "object") {
    return typeof value === "string" ? JSON.stringify(value) : shown(value);
  }
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null ? "a plain object" : shown(value);
}

const NOT_WALKED = 0;
const ARRAY = 1;
const MAP = 2;
const PLAIN_OBJECT = 3;

/** The kind of container the walk sees in `value` (see walk/containers.ts). */
function containerOf(value: object): number {
  if (Array.isArray(value)) return ARRAY;
  if (value instanceof Map) return MAP;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null ? PLAIN_OBJECT : NOT_WALKED;
}

/** Whether `value` is a TypedArray (a tensor leaf of the walk; not a DataView). */
export function isLeafArray(value: unknown): value is ArrayBufferView & { length: number } {
  return ArrayBuffer.isView(value) && !(value instanceof DataView);
}

/** Whether the walk would walk `value` (a tensor leaf or a container): no value to pass through. */
export function isWalked(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  return value instanceof Tensor || isLeafArray(value) || containerOf(value) !== NOT_WALKED;
}
