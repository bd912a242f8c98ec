/**
 * The check that a copy's data has a result's structure (into_shape.ts),
 * exactly: {@linkcode matchShape} walks the data and the result side by
 * side (the same containers, the same keys in order, the same lengths, and
 * at each leaf the tensor the structure recorded), fills the columns the
 * copy reads (the data's leaf at each position, the values passed through
 * and where they go) and throws, naming the path, where they differ. It is
 * the generic form: `into_code.ts` compiles the same walk per structure,
 * and where that says the data does not fit, this one says where.
 *
 * @module
 */

import { shown } from "../shown.ts";
import { formatPath, pathKey } from "../walk/errors.ts";
import { describe, type IntoShape, isWalked, type ShapeNode } from "./into_shape.ts";

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
