/**
 * One walk over the input structure: builds the output containers and puts
 * in each leaf's place what a sink makes of it (neither is walked again).
 *
 * Containers are `Array`, plain objects (prototype `Object.prototype` or
 * `null`; own enumerable string keys) and `Map`. Tensor leaves are
 * TypedArrays of a supported class and `Tensor`s. Everything else passes
 * through by reference.
 *
 * @module
 */

import { arrayCodeOf, NO_CODE } from "../array_code.ts";
import { isDetached, isOutOfBounds, type TypedArray, viewByteLength } from "../dtype.ts";
import { REJECTED_LEAF, Tensor, tensorInternals } from "../tensor.ts";
import {
  ARRAY,
  arrayIndex,
  MAP,
  NOT_A_CONTAINER,
  PLAIN_OBJECT,
  visitByKeys,
} from "./containers.ts";
import { SHAPE_DEPTHS, shapeAt, type VisitChild } from "./object_shapes.ts";
import { formatPath, pathKey, rejected, rethrowUnder, WalkError } from "./errors.ts";
import type { PlanHooks } from "./plan.ts";
import { afterWalk, compiledWalks, planFor } from "./plan_cache.ts";
import type { LeafSink } from "./leaf_sink.ts";

/** Containers nested deeper than this are rejected (no stack overflow). */
export const MAX_DEPTH = 2048;

/**
 * Walks `root` depth-first, calling `sink.add` for each tensor leaf in order
 * and putting its return value where the leaf was. (A sink object rather
 * than a callback: the call stays monomorphic and inlinable on the hot path.)
 *
 * @returns the output root: new containers, leaves mapped, the rest as is
 * @throws {TypeError} for a cyclic structure, a leaf over a detached buffer
 * @throws {Error} for a disposed tensor
 * @throws {RangeError} for nesting deeper than {@linkcode MAX_DEPTH}
 */
export function walk(root: unknown, sink: LeafSink): unknown {
  // A getter read during the walk could start another walk: keep ours.
  const outer = deepAncestors;
  deepAncestors = undefined;
  try {
    const plan = planFor(root);
    let output: unknown;
    if (plan) {
      plan.misses = 0;
      try {
        const taker = sink.packedWalk;
        output = taker === undefined || !taker.begin(plan.takerState)
          ? plan.run(root, [], sink)
          : plan.runPacked(root, [], sink);
      } catch (error) {
        // A plan keeps no path: the generic walk, validating only, finds the
        // same error again and names where it is.
        if (error instanceof WalkError) {
          deepAncestors = undefined;
          visit(root, 0, [], VALIDATE_ONLY);
        }
        throw error;
      }
    } else {
      output = visit(root, 0, [], sink);
    }
    sink.end?.();
    afterWalk(plan, output, PLAN_HOOKS);
    return output;
  } catch (error) {
    if (error instanceof WalkError) throw error.make(formatPath(error.path));
    throw error;
  } finally {
    deepAncestors = outer;
  }
}

/** A sink that leaves the leaves as they are (for finding an error's path again). */
const VALIDATE_ONLY: LeafSink = { add: (leaf) => leaf };

/**
 * Below this depth a cycle is found by scanning the ancestors (faster than
 * a Set for the shallow trees of real batches); from it on, the deeper
 * ancestors are also kept in a Set, so that deep trees stay linear.
 */
const SCAN_DEPTH = 32;
let deepAncestors: Set<object> | undefined;

// A plain recursive function (no closure, state passed along): about twice
// as fast as a closure. `ancestors`: the containers on the current path.
function visit(
  value: unknown,
  depth: number,
  ancestors: object[],
  sink: LeafSink,
): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (value instanceof Tensor) {
    // A detached view reads as length 0: its length is compared (cheap)
    // rather than `.buffer.detached` read (costly) for every leaf.
    const data = tensorInternals.walkData(value);
    if (data === REJECTED_LEAF) throw value.disposed ? rejected.disposed() : rejected.shrunk();
    return sink.add(value, data, NO_CODE);
  }
  const code = arrayCodeOf(value as ArrayBufferView);
  if (code !== NO_CODE) {
    const array = value as TypedArray;
    if (viewByteLength(array) === 0) {
      if (isDetached(array)) throw rejected.detached();
      if (isOutOfBounds(array)) throw rejected.outOfBounds();
    }
    return sink.add(array, array, code);
  }
  // containerKind inlined, so that a plain object's prototype is read once.
  let kind = NOT_A_CONTAINER;
  let nullPrototype = false;
  if (Array.isArray(value)) {
    kind = ARRAY;
  } else if (value instanceof Map) {
    kind = MAP;
  } else {
    const proto = Object.getPrototypeOf(value);
    if (proto === Object.prototype) {
      kind = PLAIN_OBJECT;
    } else if (proto === null) {
      kind = PLAIN_OBJECT;
      nullPrototype = true;
    }
  }
  if (kind === NOT_A_CONTAINER) return value;
  const scanned = depth < SCAN_DEPTH ? depth : SCAN_DEPTH;
  for (let d = 0; d < scanned; d++) {
    if (ancestors[d] === value) throw rejected.cyclic();
  }
  if (depth >= SCAN_DEPTH && (deepAncestors ??= new Set()).has(value)) throw rejected.cyclic();
  if (depth >= MAX_DEPTH) throw rejected.tooDeep(MAX_DEPTH);
  ancestors[depth] = value;
  if (depth >= SCAN_DEPTH) deepAncestors!.add(value);
  // The key being walked, stringified only if an error needs the path.
  let current: unknown = 0;
  try {
    if (kind === ARRAY) {
      const input = value as unknown[];
      const output = new Array(input.length);
      if (visitByKeys(input)) {
        visitHoley(input, output, depth, { ancestors, sink });
        return leave(value, depth, output);
      }
      for (let i = 0; i < input.length; i++) {
        current = i;
        output[i] = visit(input[i], depth + 1, ancestors, sink);
      }
      return leave(value, depth, output);
    }
    if (kind === MAP) {
      const output = new Map<unknown, unknown>();
      for (const [k, v] of value as Map<unknown, unknown>) {
        current = k;
        output.set(k, visit(v, depth + 1, ancestors, sink));
      }
      return leave(value, depth, output);
    }
    const input = value as Record<string, unknown>;
    const names = Object.keys(input);
    const shape = depth < SHAPE_DEPTHS && compiledWalks
      ? shapeAt(depth, names, nullPrototype, rethrowUnder)
      : undefined;
    if (shape) {
      // The compiled copy puts its own key on the error path.
      current = COMPILED;
      return leave(
        value,
        depth,
        shape.copy(input, visit as VisitChild, depth + 1, ancestors, sink),
      );
    }
    // The generic copy (many keys, `__proto__`, or past the compiled shapes):
    // own enumerable string keys, each read once, in order.
    const output: Record<string, unknown> = nullPrototype ? Object.create(null) : {};
    for (let i = 0; i < names.length; i++) {
      const k = names[i];
      current = k;
      const result = visit(input[k], depth + 1, ancestors, sink);
      // Assigning `__proto__` would set the prototype: it must be an own property.
      if (k !== "__proto__") output[k] = result;
      else Object.defineProperty(output, k, { ...OWN_PROPERTY, value: result });
    }
    // Symbol keys are dropped, as structuredClone and JSON drop them.
    return leave(value, depth, output);
  } catch (error) {
    if (error instanceof WalkError && current !== COMPILED) error.path.unshift(pathKey(current));
    throw error;
  }
}

const PLAN_HOOKS: PlanHooks = {
  visit: visit as PlanHooks["visit"],
  // Read once here: tensor.ts (which fills tensorInternals) is evaluated
  // before this module, since nothing it imports imports the walk.
  leafData: tensorInternals.walkData,
  rejected: REJECTED_LEAF,
  visitByKeys,
  leafCode: arrayCodeOf as (value: unknown) => number,
  noCode: NO_CODE,
  leafClass: Tensor,
  disposeLeaf: tensorInternals.disposeInBatch as PlanHooks["disposeLeaf"],
  beginDisposal: tensorInternals.beginDisposal,
  endDisposal: tensorInternals.endDisposal as PlanHooks["endDisposal"],
};

/** The attributes of an assigned property. */
const OWN_PROPERTY = { writable: true, enumerable: true, configurable: true };

/** Marks the error path of a compiled object copy (see `shapeAt`). */
const COMPILED = Symbol("compiled copy");

/** Ends a container's visit: off the deep-ancestor set (an error ends the walk, which drops it). */
function leave(value: object, depth: number, output: unknown): unknown {
  if (depth >= SCAN_DEPTH) deepAncestors!.delete(value);
  return output;
}

/**
 * Walks a holey array by its keys (one element at index 1e9 is one visit,
 * not a billion), filling `output` at the same indices.
 */
function visitHoley(
  input: unknown[],
  output: unknown[],
  depth: number,
  walker: { ancestors: object[]; sink: LeafSink },
): void {
  for (const key of Object.keys(input)) {
    const i = arrayIndex(key);
    if (i < 0) continue;
    try {
      output[i] = visit(input[i], depth + 1, walker.ancestors, walker.sink);
    } catch (error) {
      if (error instanceof WalkError) error.path.unshift(i);
      throw error;
    }
  }
}
