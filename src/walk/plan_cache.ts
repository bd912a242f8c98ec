/**
 * The plan cache: which structures get a compiled plan, and which plan a
 * walk (or a disposal) runs.
 *
 * A structure is compiled when it comes again; a structure seen once (keys
 * made per step) costs a look and no compile, and looks and compiles back
 * off while they find nothing to compile or their plans do not pay off.
 *
 * @module
 */

import { forgetShapes } from "./object_shapes.ts";
import { type CompiledPlan, type PlanHooks, type PlanNode, planOf, sameStructure } from "./plan.ts";
import { compilePlan, forgetPlanCode } from "./plan_compiler.ts";

/** The plans of the structures walked last, most recent first. */
const plans: CompiledPlan[] = [];
/** At most this many plans are kept. */
const MAX_PLANS = 4;
/**
 * The structures (plan nodes) of recent walks no plan covered, most recent
 * first: a structure is compiled when it comes again, so a structure seen
 * once (keys made per step) costs a look and no compile.
 */
const candidates: PlanNode[] = [];
const MAX_CANDIDATES = 4;
/**
 * Uncovered walks to let pass before the next look (the plan node of the
 * output, compared with the candidates), and the next such wait: it
 * doubles while looks find no repeated structure, and is reset by one that
 * does.
 */
let lookWait = 0;
let nextLookWait = 0;
const MAX_LOOK_WAIT = 16;
/**
 * Repeated structures to let pass before the next compile, and the next
 * such wait: it doubles with each compile, and is reset only when a plan
 * compiled since pays off (covers {@linkcode PAID_OFF} walks), once per
 * plan: walks covered by a plan that paid off long ago reset nothing.
 */
let compileWait = 0;
let nextCompileWait = 0;
const MAX_COMPILE_WAIT = 1024;
/** Covered walks after which a plan has paid for its compile. */
const PAID_OFF = 64;
/**
 * Whether walks use compiled code (plans and shapes); tests turn it off
 * for the generic walk (read by the walk as a live binding).
 */
export let compiledWalks = true;

let compiled = 0;
let lastPlanned = false;
let lastMisses = 0;

/** The most recent plan whose first levels match `root`. */
export function planFor(root: unknown): CompiledPlan | undefined {
  if (typeof root !== "object" || root === null || !compiledWalks) return undefined;
  for (let p = 0; p < plans.length; p++) {
    const plan = plans[p];
    if (!plan.matchesRoot(root)) continue;
    if (p > 0) plans.splice(p, 1), plans.unshift(plan);
    return plan;
  }
  return undefined;
}

/**
 * After a walk that completed: records whether it ran a plan, and counts a
 * plan's covered walk, or looks at the structure of an uncovered one (see
 * `candidates`, `lookWait`, `compileWait`), compiling it with `hooks`.
 */
export function afterWalk(plan: CompiledPlan | undefined, output: unknown, hooks: PlanHooks): void {
  lastPlanned = plan !== undefined;
  lastMisses = plan?.misses ?? 0;
  if (plan !== undefined && plan.misses === 0) {
    if (++plan.covered === PAID_OFF) compileWait = nextCompileWait = 0;
    return;
  }
  if (!compiledWalks) return;
  if (lookWait > 0) {
    lookWait--;
    return;
  }
  const node = planOf(output, hooks);
  if (node.kind !== "array" && node.kind !== "object") return;
  for (let c = 0; c < candidates.length; c++) {
    const same = sameStructure(candidates[c], node);
    if (same === undefined) continue;
    lookWait = nextLookWait = 0;
    if (compileWait > 0) {
      compileWait--;
      candidates[c] = same;
      return;
    }
    candidates.splice(c, 1);
    compileWait = nextCompileWait;
    nextCompileWait = Math.min(Math.max(1, 2 * nextCompileWait), MAX_COMPILE_WAIT);
    const compiledPlan = compilePlan(same, hooks);
    if (compiledPlan === undefined) return;
    plans.unshift(compiledPlan);
    compiled++;
    if (plans.length > MAX_PLANS) plans.length = MAX_PLANS;
    return;
  }
  candidates.unshift(node);
  if (candidates.length > MAX_CANDIDATES) candidates.length = MAX_CANDIDATES;
  lookWait = nextLookWait;
  nextLookWait = Math.min(Math.max(1, 2 * nextLookWait), MAX_LOOK_WAIT);
}

/** How walks used plans: for tests and diagnostics. */
export interface PlanStats {
  /** Plans compiled since the process started (a plan's code may be reused: see plan_compiler.ts). */
  compiled: number;
  /** Plans kept now. */
  kept: number;
  /** Structures seen once, kept to be compiled if they come again. */
  candidates: number;
  /** Whether the last walk that completed ran a plan. */
  lastPlanned: boolean;
  /** Values of that walk that did not match the plan (handed to the generic walk). */
  lastMisses: number;
}

/** How walks used plans so far. */
export function planStats(): PlanStats {
  return { compiled, kept: plans.length, candidates: candidates.length, lastPlanned, lastMisses };
}

/**
 * Disposes the tensors of `value` by the plan of its structure (a copy's
 * result has the structure its input was walked with), handing what does
 * not match to `rest`. Returns undefined where no plan matches, else
 * whether the disposal completed (false: `rest` gave up).
 */
export function disposeByPlan(
  value: unknown,
  rest: (value: object, depth: number, ancestors: object[]) => boolean,
): boolean | undefined {
  const plan = planFor(value);
  return plan === undefined ? undefined : plan.dispose(value, [], rest);
}

/** Drops every compiled plan and candidate and resets the waits: the next walk is generic. */
export function forgetPlans(): void {
  plans.length = candidates.length = 0;
  lookWait = nextLookWait = 0;
  compileWait = nextCompileWait = 0;
}

/**
 * For tests: forgets the plans and the object shapes, their code and the
 * budgets spent, so that long test runs keep compiling (V8 still keeps
 * the code).
 */
export function resetCompiledWalks(): void {
  forgetPlans();
  forgetPlanCode();
  forgetShapes();
}

/**
 * For tests: whether walks (and `disposeAll`) use compiled code, plans
 * and object shapes; off, every walk is the generic walk, the reference
 * the compiled ones are compared with. What was compiled is kept.
 */
export function useCompiledWalks(enabled: boolean): void {
  compiledWalks = enabled;
}
