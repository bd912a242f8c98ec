/**
 * The checks a compiled plan runs besides its inline ones: whether a root
 * matches a plan, whether Object.prototype gained enumerable keys, and the
 * generic walk of a value the plan did not expect.
 *
 * @module
 */

import type { CompiledPlan, PlanHooks, PlanNode } from "./plan.ts";

/** Whether Object.prototype (the prototype of every plain object a plan reads) has no enumerable key. */
export function noInheritedKeys(): boolean {
  for (const _ in Object.prototype) return false;
  return true;
}

/** A plan's run saw Object.prototype get an enumerable key midway: its output cannot be trusted. */
export function inheritedKeysAdded(): never {
  throw new TypeError(
    "Cannot copy a structure whose getters change Object.prototype: an enumerable property was added to it during the walk",
  );
}

/**
 * `visitCounting` for a place where the plan saw no leaf (nothing, or a
 * value of another kind): a leaf found there is a miss too. A plan made
 * from the output of a walk whose sink put no tensors at the leaves (the
 * benchmarks' and tests' sinks: numbers, or the arrays themselves) would
 * otherwise send every leaf of that structure the generic way, past the
 * packed and mirror walks, unnoticed, and never be replaced.
 */
export function visitCountingLeaves(
  visit: PlanHooks["visit"],
  { leafClass, leafCode, noCode }: Pick<PlanHooks, "leafClass" | "leafCode" | "noCode">,
): ReturnType<typeof visitCounting> {
  const counting = visitCounting(visit);
  return (value: object, depth: number, ancestors: object[], sink: unknown, plan: CompiledPlan) => {
    if (value instanceof leafClass || leafCode(value) !== noCode) plan.misses++;
    return counting(value, depth, ancestors, sink, plan);
  };
}

/**
 * The generic walk of an object where the plan expected none (or a leaf),
 * counting a miss when it is a container a plan could compile.
 */
export function visitCounting(
  visit: PlanHooks["visit"],
): (
  value: object,
  depth: number,
  ancestors: object[],
  sink: unknown,
  plan: CompiledPlan,
) => unknown {
  return (value: object, depth: number, ancestors: object[], sink: unknown, plan: CompiledPlan) => {
    if (Array.isArray(value)) {
      plan.misses++;
    } else {
      const proto = Object.getPrototypeOf(value);
      if (proto === Object.prototype || proto === null) plan.misses++;
    }
    return visit(value, depth, ancestors, sink);
  };
}

/**
 * A cheap check of a root against the plan's first two levels: an array's
 * first element, an object's keys (so that plans of different structures
 * are told apart before one runs).
 */
export function rootCheck(root: PlanNode): (value: unknown) => boolean {
  const matches = (node: PlanNode, value: unknown, levels: number): boolean => {
    if (node.kind === "array") {
      if (!Array.isArray(value)) return false;
      return levels === 0 || value.length === 0 || matches(node.element, value[0], levels - 1);
    }
    if (node.kind === "object") {
      if (typeof value !== "object" || value === null) return false;
      const proto = Object.getPrototypeOf(value);
      if (proto !== (node.nullPrototype ? null : Object.prototype)) return false;
      let j = 0;
      for (const key in value) if (key !== node.keys[j++]) return false;
      // Inherited keys come last in for-in (see `objectCheck` in compilePlan).
      return j === node.keys.length &&
        (j === 0 || node.nullPrototype || Object.hasOwn(value, node.keys[j - 1]));
    }
    if (levels > 0) return false;
    if (node.kind !== "leaf") return true;
    // A leaf's place: anything but an array or a plain object.
    if (typeof value !== "object" || value === null) return true;
    if (Array.isArray(value)) return false;
    const proto = Object.getPrototypeOf(value);
    return proto !== Object.prototype && proto !== null;
  };
  return (value) => matches(root, value, 1);
}
