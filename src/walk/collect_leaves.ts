/**
 * `collectLeaves`: the tensor leaves of a structure, in walk order, without
 * building an output.
 *
 * Apart from the walk (`walk.ts`) because the copy never needs it: the
 * benchmarks (which time a walk against a bare leaf count) and the tests
 * do, and the walk's file stays the copy's hot path alone.
 *
 * @module
 */

import type { Leaf } from "./leaf_sink.ts";
import { walk } from "./walk.ts";

/**
 * The tensor leaves of `root` in walk order, validated as by
 * {@linkcode walk} (the same errors, for the same structures).
 *
 * @returns every TypedArray and `Tensor` leaf, in order, as they are
 */
export function collectLeaves(root: unknown): Leaf[] {
  const leaves: Leaf[] = [];
  // The sink puts each leaf back where it was: the plan compiled from this
  // output then has leaves there (numbers in their place made a plan that
  // missed on every walk, recompiled, and pushed other plans out).
  walk(root, { add: (leaf) => (leaves.push(leaf), leaf) });
  return leaves;
}
