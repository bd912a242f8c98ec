/**
 * One walk over the input structure: collects the tensor leaves in order
 * and builds the output containers at the same time, so that the result is
 * assembled later by filling leaf slots (the input is not walked again).
 *
 * Containers are `Array`, plain objects (prototype `Object.prototype` or
 * `null`; own enumerable string keys) and `Map`. Tensor leaves are
 * TypedArrays of a supported class and `Tensor`s. Everything else passes
 * through by reference.
 *
 * @module
 */

import { isTypedArray, type TypedArray } from "./dtype.ts";
import { isDetached, Tensor } from "./tensor.ts";

/** A tensor leaf of the input. */
export type Leaf = TypedArray | Tensor;

/** Containers nested deeper than this are rejected (no stack overflow). */
export const MAX_DEPTH = 2048;

/** What a walk found. */
export interface Walk {
  /** Tensor leaves in depth-first order. */
  readonly leaves: Leaf[];
  /** Fills the output containers with `outputs[i]` for leaf i; returns the result root. */
  build(outputs: readonly unknown[]): unknown;
}

/** Whether `value` is a plain object (prototype Object.prototype or null). */
export function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

const LEAF = Symbol("leaf");

/** A rejection found during the walk; the path is filled in while unwinding. */
class WalkError {
  readonly path: (string | number)[] = [];
  constructor(readonly make: (path: string) => Error) {}
}

function formatPath(path: readonly (string | number)[]): string {
  let text = "$";
  for (const key of path) {
    text += typeof key === "number"
      ? `[${key}]`
      : /^[A-Za-z_$][\w$]*$/.test(key)
      ? `.${key}`
      : `[${JSON.stringify(key)}]`;
  }
  return text;
}

/**
 * Walks `root`.
 *
 * @throws {TypeError} for a cyclic structure, a leaf over a detached buffer
 * @throws {Error} for a disposed tensor
 * @throws {RangeError} for nesting deeper than {@linkcode MAX_DEPTH}
 */
export function walk(root: unknown): Walk {
  const leaves: Leaf[] = [];
  // Slot i: where the output of leaf i goes (container and key).
  const parents: unknown[] = [];
  const keys: unknown[] = [];
  // The containers on the current path: cycles are found by scanning it,
  // which beats a Set for the shallow trees of real batches.
  const ancestors: object[] = [];

  const visit = (value: unknown, parent: unknown, key: unknown, depth: number): unknown => {
    if (typeof value !== "object" || value === null) return value;
    if (value instanceof Tensor) {
      if (value.disposed) {
        throw new WalkError((path) => new Error(`Cannot copy a disposed tensor at ${path}`));
      }
      leaves.push(value);
      parents.push(parent);
      keys.push(key);
      return LEAF;
    }
    if (isTypedArray(value)) {
      if (isDetached(value)) {
        throw new WalkError((path) =>
          new TypeError(`Cannot copy a detached ArrayBuffer at ${path}`)
        );
      }
      leaves.push(value);
      parents.push(parent);
      keys.push(key);
      return LEAF;
    }
    const isArray = Array.isArray(value);
    const isMap = !isArray && value instanceof Map;
    if (!isArray && !isMap && !isPlainObject(value)) return value;
    for (let d = 0; d < depth; d++) {
      if (ancestors[d] === value) {
        throw new WalkError((path) => new TypeError(`Cannot copy a cyclic structure at ${path}`));
      }
    }
    if (depth >= MAX_DEPTH) {
      throw new WalkError((path) =>
        new RangeError(
          `Cannot copy a structure nested deeper than ${MAX_DEPTH} containers at ${path}`,
        )
      );
    }
    ancestors[depth] = value;
    let current: string | number = 0;
    try {
      if (isArray) {
        const input = value as unknown[];
        const output = new Array(input.length);
        for (let i = 0; i < input.length; i++) {
          current = i;
          output[i] = visit(input[i], output, i, depth + 1);
        }
        return output;
      }
      if (isMap) {
        const output = new Map<unknown, unknown>();
        for (const [k, v] of value as Map<unknown, unknown>) {
          current = String(k);
          output.set(k, visit(v, output, k, depth + 1));
        }
        return output;
      }
      const input = value as Record<string, unknown>;
      // A spread copies the own enumerable keys in order with one fast
      // clone; only values that change (nested containers) are stored again.
      // Leaves keep their input value until build() replaces them.
      const output: Record<string, unknown> = Object.getPrototypeOf(input) === null
        ? Object.assign(Object.create(null), input)
        : { ...input };
      const names = Object.keys(input);
      for (let i = 0; i < names.length; i++) {
        const k = names[i];
        current = k;
        const child = input[k];
        const result = visit(child, output, k, depth + 1);
        if (result !== child && result !== LEAF) output[k] = result;
      }
      return output;
    } catch (error) {
      if (error instanceof WalkError) error.path.unshift(current);
      throw error;
    }
  };

  let rootOut: unknown;
  try {
    rootOut = visit(root, undefined, undefined, 0);
  } catch (error) {
    if (error instanceof WalkError) throw error.make(formatPath(error.path));
    throw error;
  }

  return {
    leaves,
    build(outputs: readonly unknown[]): unknown {
      if (rootOut === LEAF) return outputs[0];
      for (let i = 0; i < outputs.length; i++) {
        const parent = parents[i];
        if (parent instanceof Map) parent.set(keys[i], outputs[i]);
        else (parent as Record<string | number, unknown>)[keys[i] as string] = outputs[i];
      }
      return rootOut;
    },
  };
}
