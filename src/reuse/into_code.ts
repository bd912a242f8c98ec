/**
 * The compiled form of {@linkcode matchShape}: one function per result
 * structure that reads each key by name and checks arrays, keys and the
 * result's tensors inline (a generic walk's keyed reads and container
 * checks cost more than the copy itself). It only answers whether the data
 * fits, filling the columns; where it does not, the generic
 * `matchShape` runs and throws the error with its path.
 *
 * Compiling is bounded as the walk's plans are (walk/plan_compiler.ts): V8
 * keeps the code of every distinct `new Function` source for the life of
 * the process, so code is kept by its source, and structures with Maps,
 * keys named `__proto__` or longer than {@linkcode MAX_KEY_LENGTH}, code past
 * {@linkcode MAX_SOURCE} characters, and everything past
 * {@linkcode MAX_TOTAL_SOURCE} characters in the process, are checked by
 * the generic walk instead.
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { MAP_PROBE } from "../walk/plan_compiler.ts";
import { noInheritedKeys } from "../walk/plan_checks.ts";
import type { MatchColumns } from "./into_match.ts";
import { type IntoShape, isWalked, type ShapeNode } from "./into_shape.ts";

/** The longest key compiled into a check. */
export const MAX_KEY_LENGTH = 256;
/** The longest source of one structure's check. */
export const MAX_SOURCE = 512 * 1024;
/** The most characters of distinct check code compiled in a process. */
export const MAX_TOTAL_SOURCE = 8 * 1024 * 1024;

/**
 * A compiled check: walks `data` with `result` beside it, fills `columns`
 * and returns the number of values passed through, or -1 where the data
 * does not fit (the generic walk then says where). Leaves are not checked
 * beyond their position: the caller checks each source. The result-only
 * form ({@linkcode compileCheck}'s `resultOnly`) reads no data: it checks
 * that the result still holds its tensors and refills only
 * `columns.passContainers`, for data known not to have changed (a frozen
 * structure, transfer/into/frozen.ts).
 */
export type CompiledCheck = (data: unknown, result: unknown, columns: MatchColumns) => number;

type Factory = (
  tensors: readonly Tensor[],
  keys: readonly (readonly string[])[],
  isWalked: (value: unknown) => boolean,
  getPrototypeOf: (value: object) => object | null,
  mapProbe: symbol,
  objectPrototype: object,
  hasOwnProperty: (this: object, key: string) => boolean,
  noInheritedKeys: () => boolean,
) => CompiledCheck;

const factories = new Map<string, Factory>();
let totalSource = 0;

/**
 * The compiled check of `shape`, or undefined where it is not compiled (see
 * the module doc); `resultOnly`: its result-only form (see {@linkcode CompiledCheck}).
 */
export function compileCheck(shape: IntoShape, resultOnly = false): CompiledCheck | undefined {
  const code = checkSource(shape.root, resultOnly);
  if (code === undefined) return undefined;
  const { source, keyLists } = code;
  let factory = factories.get(source);
  if (factory === undefined) {
    if (source.length > MAX_SOURCE || totalSource + source.length > MAX_TOTAL_SOURCE) {
      return undefined;
    }
    totalSource += source.length;
    factory = new Function(
      "T",
      "K",
      "isWalked",
      "getPrototypeOf",
      "MAP_PROBE",
      "ObjectPrototype",
      "hasOwnProperty",
      "noInheritedKeys",
      source,
    ) as Factory;
    factories.set(source, factory);
  }
  return factory(
    shape.tensors,
    keyLists,
    isWalked,
    Object.getPrototypeOf,
    MAP_PROBE,
    Object.prototype,
    Object.prototype.hasOwnProperty,
    noInheritedKeys,
  );
}

/** How much check code was compiled: distinct structures, and their characters. */
export function checkCodeStats(): { distinct: number; sourceChars: number } {
  return { distinct: factories.size, sourceChars: totalSource };
}

/**
 * The body of a function of `T` (the tensors), `K` (the key lists) and the
 * helpers that returns the check (its result-only form where `resultOnly`);
 * undefined for a structure not compiled.
 */
export function checkSource(
  root: ShapeNode,
  resultOnly = false,
): { source: string; keyLists: (readonly string[])[] } | undefined {
  const keyLists: (readonly string[])[] = [];
  const lines: string[] = [];
  let names = 0;
  let size = 0;
  const fresh = (prefix: string) => `${prefix}${names++}`;
  const emitLine = (line: string) => {
    size += line.length + 1;
    lines.push(line);
  };
  let compilable = true;

  // A value passed through, at `key` of containers `d` (data) and `p` (result).
  const emitPass = (d: string, p: string, key: string, indent: string) => {
    if (resultOnly) {
      // (The key and the value are the last full check's: the data has not
      // changed; the value's prototype may have, by the result's code too:
      // tested here, at its place, as the full check does.)
      const v = fresh("v");
      emitLine(`${indent}const ${v} = C.passValues[m];`);
      emitLine(
        `${indent}if (typeof ${v} === "object" && ${v} !== null && isWalked(${v})) return -1;`,
      );
      emitLine(`${indent}C.passContainers[m++] = ${p};`);
      return;
    }
    const v = fresh("v");
    emitLine(`${indent}const ${v} = ${d}[${key}];`);
    emitLine(
      `${indent}if (typeof ${v} === "object" && ${v} !== null && isWalked(${v})) return -1;`,
    );
    emitLine(
      `${indent}C.passContainers[m] = ${p}; C.passKeys[m] = ${key}; C.passValues[m++] = ${v};`,
    );
  };

  // The child `node` at `key` of containers `d` and `p`.
  const emitChild = (node: ShapeNode, d: string, p: string, key: string, indent: string) => {
    if (node.kind === "pass") return emitPass(d, p, key, indent);
    const dv = fresh("d"), pv = fresh("p");
    emitLine(
      resultOnly
        ? `${indent}const ${pv} = ${p}[${key}];`
        : `${indent}const ${dv} = ${d}[${key}], ${pv} = ${p}[${key}];`,
    );
    emit(node, dv, pv, indent);
  };

  const emit = (node: ShapeNode, d: string, p: string, indent: string): void => {
    if (!compilable || size > MAX_SOURCE) {
      compilable = false;
      return;
    }
    switch (node.kind) {
      case "leaf":
        emitLine(`${indent}if (${p} !== T[n]) return -1;`);
        emitLine(resultOnly ? `${indent}n++;` : `${indent}C.sources[n++] = ${d};`);
        return;
      case "pass":
        // Only as a child (the root is never a value passed through here).
        compilable = false;
        return;
      case "map":
        compilable = false;
        return;
      case "array": {
        const length = node.items.length;
        if (!resultOnly) {
          emitLine(`${indent}if (!Array.isArray(${d}) || ${d}.length !== ${length}) return -1;`);
        }
        if (length === 0) return;
        if (node.same && length > 1) {
          const i = fresh("i");
          emitLine(`${indent}for (let ${i} = 0; ${i} < ${length}; ${i}++) {`);
          emitChild(node.items[0], d, p, i, indent + "  ");
          emitLine(`${indent}}`);
        } else {
          for (let i = 0; i < length; i++) emitChild(node.items[i], d, p, String(i), indent);
        }
        return;
      }
      case "object": {
        const { keys, values, nullPrototype } = node;
        if (keys.some((key) => key === "__proto__" || key.length > MAX_KEY_LENGTH)) {
          compilable = false;
          return;
        }
        if (resultOnly) {
          // (The result's own containers are not checked: a result changed
          // under its structure is found at its tensors, as by the full check.)
          for (let i = 0; i < keys.length; i++) {
            emitChild(values[i], d, p, JSON.stringify(keys[i]), indent);
          }
          return;
        }
        const k = keyLists.push(keys) - 1;
        const proto = nullPrototype ? "null" : "ObjectPrototype";
        // The `in` test of MAP_PROBE (a proxy whose `has` trap throws sends
        // the data to matchShape) first: its feedback gives V8 the
        // object's map, with which it folds getPrototypeOf to a constant
        // (walk/plan_code.ts measured it: ~26 ns an object without, ~3 with).
        emitLine(
          `${indent}if (typeof ${d} !== "object" || ${d} === null || MAP_PROBE in ${d} || getPrototypeOf(${d}) !== ${proto}) return -1;`,
        );
        // Exact own keys in order, without allocating: for-in lists own
        // enumerable string keys in Object.keys order, then inherited
        // enumerable ones; where the last key listed is own, all are (checked
        // only while Object.prototype has enumerable keys: `clean` says it
        // has none, before the run and after it).
        const j = fresh("j"), key = fresh("k");
        emitLine(`${indent}let ${j} = 0;`);
        emitLine(
          `${indent}for (const ${key} in ${d}) { if (${key} !== K[${k}][${j}]) return -1; ${j}++; }`,
        );
        const last = keys.length === 0 || nullPrototype
          ? ""
          : ` || (!clean && !hasOwnProperty.call(${d}, K[${k}][${keys.length - 1}]))`;
        emitLine(`${indent}if (${j} !== ${keys.length}${last}) return -1;`);
        for (let i = 0; i < keys.length; i++) {
          emitChild(values[i], d, p, JSON.stringify(keys[i]), indent);
        }
        return;
      }
    }
  };
  if (root.kind === "pass") return undefined;
  emit(root, "data", "result", "    ");
  if (!compilable || size > MAX_SOURCE) return undefined;
  // (The result-only form runs no for-in: Object.prototype's keys are its caller's to check.)
  const source = [
    resultOnly
      ? "return function checkResult(data, result, C) {"
      : "return function check(data, result, C) {",
    "  let n = 0, m = 0;",
    ...(resultOnly ? [] : ["  const clean = noInheritedKeys();"]),
    "  try {",
    ...lines,
    "  } catch {",
    "    return -1;",
    "  }",
    resultOnly ? "  return m;" : "  return clean && !noInheritedKeys() ? -1 : m;",
    "};",
  ].join("\n");
  return { source, keyLists };
}
