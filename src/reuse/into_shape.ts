/**
 * The structure of a result that copies write into (the `into` option),
 * read once from the result itself (its containers, its tensors in the
 * walk's order: arrays by index, plain objects by their own enumerable
 * string keys, Maps by entry), each tensor checked by the caller; and how
 * the checks see and name values (what the walk walks, what passes
 * through). `into_match.ts` checks a copy's data against the structure,
 * `into_code.ts` compiles that check for a structure seen again.
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
