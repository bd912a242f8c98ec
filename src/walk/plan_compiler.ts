/**
 * Compiles plans (see plan.ts) into functions, bounded.
 *
 * Compiling is bounded: V8 keeps the code of every distinct `new Function`
 * source for the life of the process, so a plan's code is kept by its
 * source (a structure compiled again reuses it), keys longer than
 * `MAX_PLAN_KEY_LENGTH` (plan.ts) are never compiled, a plan whose code
 * would pass {@linkcode MAX_PLAN_SOURCE} characters is not compiled, and
 * past {@linkcode MAX_PLANS_SOURCE} characters of distinct code in the
 * process nothing new is compiled: the generic walk handles the rest.
 *
 * @module
 */

import {
  type CompiledPlan,
  MAX_PLAN_SOURCE,
  MAX_PLANS_SOURCE,
  type PlanHooks,
  type PlanNode,
} from "./plan.ts";
import { planSource } from "./plan_code.ts";
import { NOT_TAKEN } from "./leaf_sink.ts";
import {
  inheritedKeysAdded,
  noInheritedKeys,
  rootCheck,
  visitCounting,
  visitCountingLeaves,
} from "./plan_checks.ts";

/**
 * Compiles `root` into one function (see `planSource`). Undefined where
 * the code would be longer than {@linkcode MAX_PLAN_SOURCE} or pass the
 * process's {@linkcode MAX_PLANS_SOURCE}.
 */
export function compilePlan(root: PlanNode, hooks: PlanHooks): CompiledPlan | undefined {
  const { source, keyLists } = planSource(root);
  let factory = factories.get(source);
  if (factory === undefined) {
    if (source.length > MAX_PLAN_SOURCE || sourceChars + source.length > MAX_PLANS_SOURCE) {
      return undefined;
    }
    sourceChars += source.length;
    const constants = keyLists.map((_, k) => `K${k}`);
    factory = new Function(
      "plan",
      "visit",
      "visitCounting",
      "visitCountingLeaves",
      "leafData",
      "REJECTED",
      "visitByKeys",
      "leafCode",
      "NO_CODE",
      "Leaf",
      "getPrototypeOf",
      "MAP_PROBE",
      "ObjectPrototype",
      "hasOwnProperty",
      "noInheritedKeys",
      "inheritedKeysAdded",
      "NOT_TAKEN",
      "disposeLeaf",
      "beginDisposal",
      "endDisposal",
      ...constants,
      source,
    ) as PlanFactory;
    factories.set(source, factory);
  }
  const plan: CompiledPlan = {
    run: undefined as unknown as CompiledPlan["run"],
    runPacked: undefined as unknown as CompiledPlan["runPacked"],
    dispose: undefined as unknown as CompiledPlan["dispose"],
    matchesRoot: rootCheck(root),
    misses: 0,
    covered: 0,
    takerState: {},
  };
  const compiled = factory(
    plan,
    hooks.visit,
    visitCounting(hooks.visit),
    visitCountingLeaves(hooks.visit, hooks),
    hooks.leafData,
    hooks.rejected,
    hooks.visitByKeys,
    hooks.leafCode,
    hooks.noCode,
    hooks.leafClass,
    Object.getPrototypeOf,
    MAP_PROBE,
    Object.prototype,
    Object.prototype.hasOwnProperty,
    noInheritedKeys,
    inheritedKeysAdded,
    NOT_TAKEN,
    hooks.disposeLeaf,
    hooks.beginDisposal,
    hooks.endDisposal,
    ...keyLists,
  );
  plan.run = compiled.run;
  plan.runPacked = compiled.runPacked;
  plan.dispose = compiled.dispose;
  return plan;
}
/**
 * A symbol no object has (it never leaves the library: mod.ts does not
 * export it): the plans' code, and the compiled checks of a copy into an
 * earlier result (reuse/into_code.ts), test each object for it with `in`
 * before asking for its prototype (plan_code.ts says why). On an ordinary
 * object the test runs no user code, whatever its getters; a proxy sees
 * only its `has` trap.
 */
export const MAP_PROBE: unique symbol = Symbol("map probe");
/** What `new Function` made of a plan's code: given the plan and its hooks, its two functions. */
type PlanFactory = (...args: unknown[]) => Pick<CompiledPlan, "run" | "runPacked" | "dispose">;

/**
 * The compiled code of each plan by its source: a structure compiled again
 * (its plan dropped from the kept ones, then walked again) reuses it.
 * Bounded by {@linkcode MAX_PLANS_SOURCE}.
 */
const factories = new Map<string, PlanFactory>();
/** Characters of the code in `factories`. */
let sourceChars = 0;

/** How much plan code was compiled: distinct plans, and their characters. */
export function planCodeStats(): { distinct: number; sourceChars: number } {
  return { distinct: factories.size, sourceChars };
}

/** Forgets the compiled code and the budget spent (for tests: V8's cache keeps the code). */
export function forgetPlanCode(): void {
  factories.clear();
  sourceChars = 0;
}
