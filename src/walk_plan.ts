/**
 * Compiled walks for structures seen before.
 *
 * The batches of one training run share their structure: the same keys and
 * nesting, only the lengths of arrays and tensors change. The generic walk
 * decides at every container what it is (a `Tensor`? a TypedArray? an
 * array? a Map? a plain object?), lists an object's keys and looks up its
 * compiled shape: per container that costs more than the leaves it leads
 * to. A plan is the structure of a walk already done, compiled into one
 * function with the check of each node inlined: an object node checks the
 * prototype and the exact own keys, an array node `Array.isArray`, a leaf
 * node `instanceof Tensor`. A value that fails its node's check is handed
 * to the generic walk (counted as a miss), so a plan is never wrong, only
 * slower where the structure changed.
 *
 * A plan's containers are shallower than the generic walk's cycle-scan
 * depth, and each one records itself as an ancestor before its children
 * are visited: the generic walk, which every non-matching or unplanned
 * value reaches, still finds every cycle (a cycle is infinite, a plan is
 * not, so the cycle's path leaves the plan).
 *
 * Compiling is bounded: V8 keeps the code of every distinct `new Function`
 * source for the life of the process, so a plan's code is kept by its
 * source (a structure compiled again reuses it), keys longer than
 * {@linkcode MAX_PLAN_KEY_LENGTH} are never compiled, a plan whose code
 * would pass {@linkcode MAX_PLAN_SOURCE} characters is not compiled, and
 * past {@linkcode MAX_PLANS_SOURCE} characters of distinct code in the
 * process nothing new is compiled: the generic walk handles the rest.
 *
 * @module
 */

import type { Tensor } from "./tensor.ts";

/** What a plan calls back into: the generic walk and the leaf visit. */
export interface PlanHooks {
  /** The generic walk of one value at `depth` (with its ancestors). */
  visit(value: unknown, depth: number, ancestors: object[], sink: unknown): unknown;
  /** Whether an array is long and has holes (the generic walk then visits only its keys). */
  isHoley(input: unknown[]): boolean;
  /** Whether a value is a TypedArray leaf (`isTypedArray`). */
  isLeafArray(value: unknown): value is { byteLength: number };
  /** The host data of a leaf (`tensorData`), compared with its `byteLength`. */
  leafData(value: Tensor): { byteLength: number } | undefined;
  /** The class of the leaves a plan checks for inline. */
  leafClass: typeof Tensor;
}

/** A compiled plan: the walk of a structure like the one it was made from. */
export interface CompiledPlan {
  /** Walks `root`; every value that does not match the plan counts as a miss. */
  run(root: unknown, ancestors: object[], sink: unknown): unknown;
  /**
   * Disposes every tensor in `root` (a structure like the plan's, a copy's
   * result), handing what does not match to `rest(value, depth,
   * ancestors)`, the generic disposal; false when `rest` gave up.
   */
  dispose(
    root: unknown,
    ancestors: object[],
    rest: (value: object, depth: number, ancestors: object[]) => boolean,
  ): boolean;
  /** Whether `root` matches the plan's root node (a cheap pre-check). */
  matchesRoot(root: unknown): boolean;
  /** Misses of the runs so far (reset by the caller). */
  misses: number;
  /** Walks the plan covered without a miss (counted by the caller). */
  covered: number;
}

/**
 * A node of a plan: `none` (no value seen: an empty array's elements),
 * `leaf` (a `Tensor` or TypedArray), `other` (a primitive or an object
 * passed through), `generic` (a container the plan leaves to the generic
 * walk: a Map, one past the plan's limits, or values of different kinds),
 * or a compiled array or plain object.
 */
export type PlanNode =
  | { readonly kind: "none" }
  | { readonly kind: "leaf" }
  | { readonly kind: "other" }
  | { readonly kind: "generic" }
  | { readonly kind: "array"; readonly element: PlanNode }
  | {
    readonly kind: "object";
    readonly keys: readonly string[];
    readonly nullPrototype: boolean;
    readonly values: readonly PlanNode[];
  };

/** A plain-object node of a plan. */
type ObjectNode = Extract<PlanNode, { kind: "object" }>;

const NONE: PlanNode = { kind: "none" };
const LEAF: PlanNode = { kind: "leaf" };
const OTHER: PlanNode = { kind: "other" };
const GENERIC: PlanNode = { kind: "generic" };

/** Containers at this depth and deeper are left to the generic walk. */
export const MAX_PLAN_DEPTH = 24;
/** Objects with more keys than this are left to the generic walk. */
export const MAX_PLAN_KEYS = 256;
/** Objects with a key longer than this are left to the generic walk (the key is in the code). */
export const MAX_PLAN_KEY_LENGTH = 256;
/**
 * The size of the largest plan compiled: containers plus object keys, and
 * one more per {@linkcode KEY_CHARS_PER_UNIT} characters of keys (the
 * generated code grows with all three); past it, the rest is left generic.
 */
export const MAX_PLAN_SIZE = 4096;
/** Characters of keys that count as one unit of a plan's size. */
export const KEY_CHARS_PER_UNIT = 32;
/** A plan whose generated code is longer than this is not compiled. */
export const MAX_PLAN_SOURCE = 4 * 1024 * 1024;
/** Characters of distinct plan code compiled in a process, past which nothing new is compiled. */
export const MAX_PLANS_SOURCE = 16 * 1024 * 1024;

/**
 * The plan of a walk's output: its containers (arrays, plain objects) are
 * the input's, and an instance of `leafClass` stands where each leaf was.
 * Arrays get one node for all their elements: the merge of the elements'
 * nodes (elements of different kinds merge to "generic"); a long holey
 * array is a generic node (reading it by index would visit its holes).
 */
export function planOf(
  output: unknown,
  { leafClass, isHoley }: Pick<PlanHooks, "leafClass" | "isHoley">,
): PlanNode {
  let budget = MAX_PLAN_SIZE;
  const node = (value: unknown, depth: number): PlanNode => {
    if (typeof value !== "object" || value === null) return OTHER;
    if (value instanceof leafClass) return LEAF;
    if (value instanceof Map) return GENERIC;
    const array = Array.isArray(value);
    const proto = array ? Array.prototype : Object.getPrototypeOf(value);
    if (!array && proto !== Object.prototype && proto !== null) return OTHER;
    if (depth >= MAX_PLAN_DEPTH || budget <= 0) return GENERIC;
    if (array) {
      if (isHoley(value)) return GENERIC;
      budget--;
      let element = NONE;
      for (let i = 0; i < value.length && element !== GENERIC; i++) {
        element = merge(element, node(value[i], depth + 1));
      }
      return { kind: "array", element };
    }
    const keys = Object.keys(value);
    if (keys.length > MAX_PLAN_KEYS) return GENERIC;
    let size = 1 + keys.length;
    for (let i = 0; i < keys.length; i++) {
      const length = keys[i].length;
      if (length > MAX_PLAN_KEY_LENGTH || keys[i] === "__proto__") return GENERIC;
      size += Math.ceil(length / KEY_CHARS_PER_UNIT);
    }
    if ((budget -= size) < 0) return GENERIC;
    const record = value as Record<string, unknown>;
    const values = keys.map((key) => node(record[key], depth + 1));
    return { kind: "object", keys, nullPrototype: proto === null, values };
  };
  return node(output, 0);
}

/**
 * One node for values of nodes `a` and `b`: `a` itself where `b` adds
 * nothing (so that merging equal elements allocates nothing).
 */
function merge(a: PlanNode, b: PlanNode): PlanNode {
  if (a === b || b.kind === "none") return a;
  if (a.kind === "none") return b;
  if (a.kind === "array" && b.kind === "array") {
    const element = merge(a.element, b.element);
    return element === a.element ? a : { kind: "array", element };
  }
  if (a.kind === "object" && b.kind === "object" && sameKeys(a, b)) {
    let values: PlanNode[] | undefined;
    for (let i = 0; i < a.values.length; i++) {
      const value = merge(a.values[i], b.values[i]);
      if (value !== a.values[i]) (values ??= a.values.slice())[i] = value;
    }
    return values ? { ...a, values } : a;
  }
  if (a.kind === b.kind && a.kind !== "array" && a.kind !== "object") return a;
  return GENERIC;
}

/**
 * The node of two walks' structures where they are the same (an empty
 * array's elements match any elements): the plan of it covers both. Else
 * undefined.
 */
export function sameStructure(a: PlanNode, b: PlanNode): PlanNode | undefined {
  if (a === b || b.kind === "none") return a;
  if (a.kind === "none") return b;
  if (a.kind === "array" && b.kind === "array") {
    const element = sameStructure(a.element, b.element);
    if (element === undefined) return undefined;
    return element === a.element ? a : { kind: "array", element };
  }
  if (a.kind === "object" && b.kind === "object") {
    if (!sameKeys(a, b)) return undefined;
    let values: PlanNode[] | undefined;
    for (let i = 0; i < a.values.length; i++) {
      const value = sameStructure(a.values[i], b.values[i]);
      if (value === undefined) return undefined;
      if (value !== a.values[i]) (values ??= a.values.slice())[i] = value;
    }
    return values ? { ...a, values } : a;
  }
  return a.kind === b.kind ? a : undefined;
}

function sameKeys(
  a: { keys: readonly string[]; nullPrototype: boolean },
  b: { keys: readonly string[]; nullPrototype: boolean },
): boolean {
  if (a.nullPrototype !== b.nullPrototype || a.keys.length !== b.keys.length) return false;
  for (let i = 0; i < a.keys.length; i++) if (a.keys[i] !== b.keys[i]) return false;
  return true;
}

/**
 * Compiles `root` into one function. Each node becomes inline code that
 * checks the value and builds its output, or calls the generic walk.
 * Undefined where the code would be longer than {@linkcode MAX_PLAN_SOURCE}
 * or pass the process's {@linkcode MAX_PLANS_SOURCE}.
 */
export function compilePlan(root: PlanNode, hooks: PlanHooks): CompiledPlan | undefined {
  const keyLists: (readonly string[])[] = [];
  let names = 0;
  const fresh = (prefix: string) => `${prefix}${names++}`;
  const lines: string[] = [];
  const generic = (v: string, depth: number) => `visit(${v}, ${depth}, anc, sink)`;
  // A primitive as it is, any object through `call`.
  const passOr = (v: string, call: string) =>
    `${v} === null || typeof ${v} !== "object" ? ${v} : ${call}`;

  // Emits the check that `v` is a plain object with exactly the node's
  // keys, in order, into a new variable, and returns its name.
  // `unlessClean`: the last key's check is skipped while the variable
  // `clean` says Object.prototype has no enumerable key (see `run`).
  const objectCheck = (node: ObjectNode, v: string, indent: string, unlessClean: boolean) => {
    const k = keyLists.push(node.keys) - 1;
    const j = fresh("j"), key = fresh("k"), ok = fresh("ok");
    const proto = node.nullPrototype ? "null" : "ObjectPrototype";
    const n = node.keys.length;
    // Exact own keys in order, without allocating: for-in lists own
    // enumerable string keys in Object.keys order, then inherited
    // enumerable ones (none on Object.prototype, unless it was changed).
    // The inherited ones come last: where the last key listed is own,
    // every key listed is.
    const own = `hasOwnProperty.call(${v}, K${k}[${n - 1}])`;
    // (A key whose inherited value is undefined disposes nothing: the
    // disposal checks only keys Object.prototype has a value for.)
    const inherited = `ObjectPrototype[${JSON.stringify(node.keys[n - 1])}] !== undefined`;
    const ownLast = node.nullPrototype || n === 0
      ? ""
      : unlessClean
      ? ` || (!clean && !${own})`
      : ` || (${inherited} && !${own})`;
    lines.push(
      `${indent}let ${ok} = typeof ${v} === "object" && ${v} !== null && getPrototypeOf(${v}) === ${proto};`,
      `${indent}if (${ok}) {`,
      `${indent}  let ${j} = 0;`,
      `${indent}  for (const ${key} in ${v}) {`,
      `${indent}    if (${key} !== K${k}[${j}]) { ${ok} = false; break; }`,
      `${indent}    ${j}++;`,
      `${indent}  }`,
      `${indent}  if (${j} !== ${n}${ownLast}) ${ok} = false;`,
      `${indent}}`,
    );
    return ok;
  };

  // Emits code that puts the walk of `v` (at `depth`) into variable `out`.
  const emit = (node: PlanNode, v: string, depth: number, out: string, indent: string) => {
    switch (node.kind) {
      case "leaf":
        // The leaf's checks inline (a disposed tensor, one whose data
        // shrank, or an empty TypedArray, which may be detached, goes to
        // the generic walk, which checks it and throws its error).
        lines.push(
          `${indent}if (${v} instanceof Leaf && !${v}.disposed && ((d = leafData(${v})) === undefined || d.byteLength === ${v}.byteLength)) ${out} = sink.add(${v}, d);`,
          `${indent}else if (isLeafArray(${v}) && ${v}.byteLength !== 0) ${out} = sink.add(${v}, ${v});`,
          `${indent}else ${out} = ${passOr(v, `visitCounting(${v}, ${depth}, anc, sink, plan)`)};`,
        );
        return;
      case "none":
      case "other":
        // A container here is a miss: the structure grew past the plan.
        lines.push(
          `${indent}${out} = ${passOr(v, `visitCounting(${v}, ${depth}, anc, sink, plan)`)};`,
        );
        return;
      case "generic":
        lines.push(`${indent}${out} = ${passOr(v, generic(v, depth))};`);
        return;
      case "array": {
        const n = fresh("n"), o = fresh("o"), i = fresh("i"), e = fresh("e"), r = fresh("r");
        lines.push(
          `${indent}if (Array.isArray(${v}) && !isHoley(${v})) {`,
          `${indent}  anc[${depth}] = ${v};`,
          `${indent}  const ${n} = ${v}.length, ${o} = new Array(${n});`,
          `${indent}  for (let ${i} = 0; ${i} < ${n}; ${i}++) {`,
          `${indent}    const ${e} = ${v}[${i}];`,
          `${indent}    let ${r};`,
        );
        emit(node.element, e, depth + 1, r, `${indent}    `);
        lines.push(
          `${indent}    ${o}[${i}] = ${r};`,
          `${indent}  }`,
          `${indent}  ${out} = ${o};`,
          `${indent}} else {`,
          `${indent}  plan.misses++;`,
          `${indent}  ${out} = ${generic(v, depth)};`,
          `${indent}}`,
        );
        return;
      }
      case "object": {
        const ok = objectCheck(node, v, indent, true);
        lines.push(`${indent}if (${ok}) {`, `${indent}  anc[${depth}] = ${v};`);
        // Every value is read before any is visited, as the generic walk does.
        const values = node.keys.map(() => fresh("v"));
        const outs = node.keys.map(() => fresh("w"));
        node.keys.forEach((name, i) =>
          lines.push(`${indent}  const ${values[i]} = ${v}[${JSON.stringify(name)}];`)
        );
        node.values.forEach((child, i) => {
          lines.push(`${indent}  let ${outs[i]};`);
          emit(child, values[i], depth + 1, outs[i], `${indent}  `);
        });
        const fields = node.keys.map((name, i) => `${JSON.stringify(name)}: ${outs[i]}`);
        if (node.nullPrototype) fields.unshift("__proto__: null");
        lines.push(
          `${indent}  ${out} = { ${fields.join(", ")} };`,
          `${indent}} else {`,
          `${indent}  plan.misses++;`,
          `${indent}  ${out} = ${generic(v, depth)};`,
          `${indent}}`,
        );
        return;
      }
    }
  };

  // Emits code that disposes every tensor in `v` (at `depth`); the rest of
  // the structure goes to `rest` (the generic disposal), which returns
  // false when it gave up (too deep), and so does the plan's function.
  const emitDispose = (node: PlanNode, v: string, depth: number, indent: string) => {
    const rest =
      `if (${v} !== null && typeof ${v} === "object" && !rest(${v}, ${depth}, anc)) return false;`;
    switch (node.kind) {
      case "leaf":
        lines.push(`${indent}if (${v} instanceof Leaf) ${v}.dispose();`, `${indent}else ${rest}`);
        return;
      case "none":
      case "other":
      case "generic":
        lines.push(`${indent}${rest}`);
        return;
      case "array": {
        const n = fresh("n"), i = fresh("i"), e = fresh("e");
        lines.push(
          `${indent}if (Array.isArray(${v}) && !isHoley(${v})) {`,
          `${indent}  anc[${depth}] = ${v};`,
          `${indent}  for (let ${i} = 0, ${n} = ${v}.length; ${i} < ${n}; ${i}++) {`,
          `${indent}    const ${e} = ${v}[${i}];`,
        );
        emitDispose(node.element, e, depth + 1, `${indent}    `);
        lines.push(`${indent}  }`, `${indent}} else ${rest}`);
        return;
      }
      case "object": {
        const ok = objectCheck(node, v, indent, false);
        lines.push(`${indent}if (${ok}) {`, `${indent}  anc[${depth}] = ${v};`);
        node.keys.forEach((name, i) => {
          const value = fresh("v");
          lines.push(`${indent}  const ${value} = ${v}[${JSON.stringify(name)}];`);
          emitDispose(node.values[i], value, depth + 1, `${indent}  `);
        });
        lines.push(`${indent}} else ${rest}`);
        return;
      }
    }
  };

  // Whether Object.prototype has an enumerable key is checked once a run
  // (its objects then need no check of their own each): before, and after
  // the run, since a getter (or proxy) of the input could add one midway,
  // and then the run's output cannot be trusted. A disposal cannot be
  // undone: it checks each object whose last key Object.prototype has a
  // value for (a cheap load that finds nothing, as a rule).
  lines.push(
    `"use strict";`,
    `function run(root, anc, sink) {`,
    `  let result, d;`,
    `  const clean = noInheritedKeys();`,
  );
  emit(root, "root", 0, "result", "  ");
  lines.push(
    `  if (clean && !noInheritedKeys()) inheritedKeysAdded();`,
    `  return result;`,
    `}`,
    `function dispose(root, anc, rest) {`,
  );
  emitDispose(root, "root", 0, "  ");
  lines.push(`  return true;`, `}`, `return { run, dispose };`);
  const source = lines.join("\n");
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
      "leafData",
      "isHoley",
      "isLeafArray",
      "Leaf",
      "getPrototypeOf",
      "ObjectPrototype",
      "hasOwnProperty",
      "noInheritedKeys",
      "inheritedKeysAdded",
      ...constants,
      source,
    ) as PlanFactory;
    factories.set(source, factory);
  }
  const plan: CompiledPlan = {
    run: undefined as unknown as CompiledPlan["run"],
    dispose: undefined as unknown as CompiledPlan["dispose"],
    matchesRoot: rootCheck(root),
    misses: 0,
    covered: 0,
  };
  const compiled = factory(
    plan,
    hooks.visit,
    visitCounting(hooks.visit),
    hooks.leafData,
    hooks.isHoley,
    hooks.isLeafArray,
    hooks.leafClass,
    Object.getPrototypeOf,
    Object.prototype,
    Object.prototype.hasOwnProperty,
    noInheritedKeys,
    inheritedKeysAdded,
    ...keyLists,
  );
  plan.run = compiled.run;
  plan.dispose = compiled.dispose;
  return plan;
}

/** What `new Function` made of a plan's code: given the plan and its hooks, its two functions. */
type PlanFactory = (...args: unknown[]) => Pick<CompiledPlan, "run" | "dispose">;

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

/** Whether Object.prototype (the prototype of every plain object a plan reads) has no enumerable key. */
function noInheritedKeys(): boolean {
  for (const _ in Object.prototype) return false;
  return true;
}

/** A plan's run saw Object.prototype get an enumerable key midway: its output cannot be trusted. */
function inheritedKeysAdded(): never {
  throw new TypeError(
    "Cannot copy a structure whose getters change Object.prototype: an enumerable property was added to it during the walk",
  );
}

/**
 * The generic walk of an object where the plan expected none (or a leaf),
 * counting a miss when it is a container a plan could compile.
 */
function visitCounting(visit: PlanHooks["visit"]) {
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
function rootCheck(root: PlanNode): (value: unknown) => boolean {
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
