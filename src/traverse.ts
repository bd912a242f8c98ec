/**
 * One walk over the input structure: builds the output containers and puts
 * in each leaf's place what a callback makes of it, so neither the input nor
 * the output is walked again.
 *
 * Containers are `Array`, plain objects (prototype `Object.prototype` or
 * `null`; own enumerable string keys) and `Map`. Tensor leaves are
 * TypedArrays of a supported class and `Tensor`s. Everything else passes
 * through by reference.
 *
 * @module
 */

import { isTypedArray, type TypedArray } from "./dtype.ts";
import { Tensor } from "./tensor.ts";
import { tensorData } from "./tensor_internals.ts";
import { isDetached, isOutOfBounds } from "./tensor_args.ts";
import { forgetShapes, sameKeys, type Shape, shapeOf, type VisitChild } from "./object_shapes.ts";
import { formatPath, pathKey, WalkError } from "./walk_error.ts";
import {
  type CompiledPlan,
  compilePlan,
  forgetPlanCode,
  type PlanHooks,
  type PlanNode,
  planOf,
  sameStructure,
} from "./walk_plan.ts";

/** A tensor leaf of the input. */
export type Leaf = TypedArray | Tensor;

/** Receives the leaves of a walk; what `add` returns takes the leaf's place. */
export interface LeafSink {
  /**
   * Called for each tensor leaf, in walk order, with the leaf's host bytes
   * where the walk read them (a TypedArray leaf itself, the array a CPU
   * `Tensor` wraps; undefined for tensors in pooled memory).
   */
  add(leaf: Leaf, data: TypedArray | undefined): unknown;
  /** Called once after the last leaf of a walk that completed. */
  end?(): void;
}

/** Containers nested deeper than this are rejected (no stack overflow). */
export const MAX_DEPTH = 2048;

/** Whether `value` is a plain object (prototype Object.prototype or null). */
function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Not a container: passed through as is. */
export const NOT_A_CONTAINER = 0;
/** An `Array`. */
export const ARRAY = 1;
/** A `Map` (its values are walked). */
export const MAP = 2;
/** A plain object (its own enumerable string keys are walked). */
export const PLAIN_OBJECT = 3;

/**
 * Which kind of container `value` is, for the walk and for `disposeAll`
 * alike: arrays, Maps and plain objects are walked; everything else is not.
 */
export function containerKind(value: object): number {
  if (Array.isArray(value)) return ARRAY;
  if (value instanceof Map) return MAP;
  return isPlainObject(value) ? PLAIN_OBJECT : NOT_A_CONTAINER;
}

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
        output = plan.run(root, [], sink);
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
    lastPlanned = plan !== undefined;
    lastMisses = plan?.misses ?? 0;
    afterWalk(plan, output);
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
/** Whether walks use compiled code (plans and shapes); tests turn it off for the generic walk. */
let compiledWalks = true;

/** The most recent plan whose first levels match `root`. */
function planFor(root: unknown): CompiledPlan | undefined {
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
 * After a walk: counts a plan's covered walk, or looks at the structure of
 * an uncovered one (see `candidates`, `lookWait`, `compileWait`).
 */
function afterWalk(plan: CompiledPlan | undefined, output: unknown): void {
  if (plan !== undefined && plan.misses === 0) {
    if (++plan.covered === PAID_OFF) compileWait = nextCompileWait = 0;
    return;
  }
  if (!compiledWalks) return;
  if (lookWait > 0) {
    lookWait--;
    return;
  }
  const node = planOf(output, PLAN_HOOKS);
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
    const compiledPlan = compilePlan(same, PLAN_HOOKS);
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

let compiled = 0;
let lastPlanned = false;
let lastMisses = 0;

/** How walks used plans: for tests and diagnostics. */
export interface PlanStats {
  /** Plans compiled since the process started (a plan's code may be reused: see walk_plan.ts). */
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
  lastShapes.fill(undefined);
}

/**
 * For tests: whether walks (and `disposeAll`) use compiled code, plans
 * and object shapes; off, every walk is the generic walk, the reference
 * the compiled ones are compared with. What was compiled is kept.
 */
export function useCompiledWalks(enabled: boolean): void {
  compiledWalks = enabled;
}

/**
 * Below this depth a cycle is found by scanning the ancestors (faster than
 * a Set for the shallow trees of real batches); from it on, the deeper
 * ancestors are also kept in a Set, so that deep trees stay linear.
 */
const SCAN_DEPTH = 32;
let deepAncestors: Set<object> | undefined;

/** Arrays longer than this are checked for holes before their indices are walked. */
const SPARSE_CHECK_LENGTH = 1 << 16;

// A plain recursive function (no closure, state passed along) is about twice
// as fast as a closure here, and the walk is on the hot path of every copy.
// `ancestors` holds the containers on the current path: cycles are found by
// scanning it, which beats a Set for the shallow trees of real batches.
function visit(
  value: unknown,
  depth: number,
  ancestors: object[],
  sink: LeafSink,
): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (value instanceof Tensor) {
    if (value.disposed) {
      throw new WalkError((path) => new Error(`Cannot copy a disposed tensor at ${path}`));
    }
    // A detached view reads as length 0: compare lengths (cheap) rather
    // than reading `.buffer.detached` (costly) for every leaf.
    const data = tensorData(value);
    if (data !== undefined && data.byteLength !== value.byteLength) {
      throw new WalkError((path) =>
        new TypeError(
          `Cannot copy a tensor whose buffer was detached or shrunk after Tensor.from() at ${path}`,
        )
      );
    }
    return sink.add(value, data);
  }
  if (isTypedArray(value)) {
    if (value.byteLength === 0) {
      if (isDetached(value)) {
        throw new WalkError((path) =>
          new TypeError(`Cannot copy a detached ArrayBuffer at ${path}`)
        );
      }
      if (isOutOfBounds(value)) {
        throw new WalkError((path) =>
          new TypeError(
            `Cannot copy a view that no longer fits its resized ArrayBuffer at ${path}`,
          )
        );
      }
    }
    return sink.add(value, value);
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
    if (ancestors[d] === value) {
      throw new WalkError((path) => new TypeError(`Cannot copy a cyclic structure at ${path}`));
    }
  }
  if (depth >= SCAN_DEPTH && (deepAncestors ??= new Set()).has(value)) {
    throw new WalkError((path) => new TypeError(`Cannot copy a cyclic structure at ${path}`));
  }
  if (depth >= MAX_DEPTH) {
    throw new WalkError((path) =>
      new RangeError(
        `Cannot copy a structure nested deeper than ${MAX_DEPTH} containers at ${path}`,
      )
    );
  }
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
    const shape = depth < SHAPE_DEPTHS ? shapeAt(depth, names, nullPrototype) : undefined;
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
      if (k !== "__proto__") {
        output[k] = result;
      } else {
        // Assigning would set the prototype: the key must be an own property.
        Object.defineProperty(output, k, {
          value: result,
          writable: true,
          enumerable: true,
          configurable: true,
        });
      }
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
  leafData: tensorData,
  isHoley: visitByKeys,
  isLeafArray: isTypedArray,
  leafClass: Tensor,
};

/** Marks the error path of a compiled object copy (see `shapeAt`). */
const COMPILED = Symbol("compiled copy");

/** Depths with a remembered shape (deeper objects look theirs up by keys). */
const SHAPE_DEPTHS = 64;
const lastShapes: (Shape | undefined)[] = new Array(SHAPE_DEPTHS);

/**
 * The compiled copy for a plain object with `names` at `depth`: objects at
 * one depth of a batch mostly share their keys, so the last shape seen
 * there is tried first (a few pointer comparisons).
 */
function shapeAt(depth: number, names: string[], nullPrototype: boolean): Shape | undefined {
  if (!compiledWalks) return undefined;
  const last = lastShapes[depth];
  if (last !== undefined && sameKeys(names, nullPrototype, last)) return last;
  const shape = shapeOf(names, nullPrototype, rethrowUnder);
  if (shape !== undefined) lastShapes[depth] = shape;
  return shape;
}

/** A compiled copy's error path: the key the failing child was under. */
function rethrowUnder(error: unknown, key: string): never {
  if (error instanceof WalkError) error.path.unshift(pathKey(key));
  throw error;
}

/**
 * Ends a container's visit: takes it off the deep-ancestor set (an error
 * ends the whole walk instead, and `walk` drops the set).
 */
function leave(value: object, depth: number, output: unknown): unknown {
  if (depth >= SCAN_DEPTH) deepAncestors!.delete(value);
  return output;
}

/**
 * Whether an array has holes, in time up to its first hole (so a huge
 * sparse array costs little) and without allocating (listing the keys of
 * 100,000 elements took 1.8 ms). `in` also sees indexed properties of the
 * prototypes, as reading by index does: such an index counts as present.
 */
function isHoley(input: unknown[]): boolean {
  for (let i = 0; i < input.length; i++) if (!(i in input)) return true;
  return false;
}

/**
 * Whether an array must be visited by its keys rather than its indices:
 * longer than {@linkcode SPARSE_CHECK_LENGTH} and holey (a huge sparse
 * array is then a few visits, not billions). Shorter arrays are visited by
 * index, their holes read as `undefined`.
 */
export function visitByKeys(input: unknown[]): boolean {
  return input.length > SPARSE_CHECK_LENGTH && isHoley(input);
}

/**
 * The array index a key names, or -1 for a named property: only the
 * canonical form of an integer below 2^32 - 1 is an index (`"7"`, not
 * `"07"`, `"7.0"`, `" 7"`, `"+7"`, `"0x7"`, `"7e0"`, `"-0"`, `""` or
 * `"-1"`, which `Number` also reads as integers).
 */
export function arrayIndex(key: string): number {
  const i = Number(key);
  return i >= 0 && i < 4294967295 && Number.isInteger(i) && String(i) === key ? i : -1;
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

/** The tensor leaves of `root` in walk order (validated as by {@linkcode walk}). */
export function collectLeaves(root: unknown): Leaf[] {
  const leaves: Leaf[] = [];
  walk(root, { add: (leaf) => leaves.push(leaf) });
  return leaves;
}
