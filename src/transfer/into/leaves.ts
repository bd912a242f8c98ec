/**
 * A copy's data read against the result it is copied into: each leaf
 * checked against the tensor it replaces (a CPU leaf of its dtype and
 * shape, not disposed or detached), its bytes and arena recorded, and each
 * group of the result (a storage: record.ts) marked as one DMA from
 * an arena (every leaf lies in one arena at one distance from its place in
 * the block) or to be packed.
 *
 * A leaf's fields are read as an ordinary copy's route reads them
 * (leaf_fields.ts). The check runs in two forms: inline in
 * {@linkcode readData}'s loop for a leaf that fits, and, for any other
 * leaf, {@linkcode leafProblem}, which tells a misfit from a disposed or
 * detached leaf, reads pinned and empty leaves, and whose code
 * {@linkcode leafThrower} turns into the error with the leaf's path.
 *
 * @module
 */

import { type ArenaMemory, arenaOf } from "../../arena_index.ts";
import { arrayCodeOf, CODE_DTYPE } from "../../array_code.ts";
import { CPU } from "../../device.ts";
import { isDetached, type TypedArray, viewByteLength, viewByteOffset } from "../../dtype.ts";
import { type LeafFields, leafFields, readLeaf } from "../../leaf_fields.ts";
import { type LeafCheck, matchShape } from "../../reuse/into_match.ts";
import { compileCheck } from "../../reuse/into_code.ts";
import { describe, isLeafArray, isWalked } from "../../reuse/into_shape.ts";
import { REJECTED_LEAF, sameDims, Tensor, tensorInternals } from "../../tensor.ts";
import { noInheritedKeys } from "../../walk/plan_checks.ts";
import { frozenAlong, frozenCounts, frozenPathReady } from "./frozen.ts";
import { noteLeaf, sameLeaves, startRead } from "./known.ts";
import { DIRECT, type IntoRecord, PACK, UNSET } from "./record.ts";

/** The data's leaf is not of the tensor's dtype and shape (or not a leaf). */
export const MISFIT = 1;
/** The data's leaf is a tensor on a CUDA device. */
export const ON_CUDA = 2;
/** The data's leaf is a disposed tensor. */
export const DISPOSED_INPUT = 3;
/** The data's leaf is a detached (or shrunk) view, or a tensor over one. */
export const DETACHED = 4;
/** The result's tensor at the leaf's place was disposed (or lost its memory). */
export const DISPOSED_OUTPUT = 5;
/** What {@linkcode leafProblem} returns for a leaf that fits and lies outside any arena. */
export const FITS_OUTSIDE_ARENA = -1;

const FIELDS: LeafFields = leafFields();

/** Reads that found the last read's leaves (`same`), and full reads (for tests and benchmarks). */
export const readCounts: { same: number; full: number } = { same: 0, full: 0 };

/** Whether the leaf read into `fields` fits tensor `n` of the record: CPU, its dtype and shape. */
function fits(record: IntoRecord, n: number, fields: LeafFields): boolean {
  return fields.device === CPU && fields.dtype === record.dtypes[n] &&
    fields.byteLength === record.byteLengths[n] &&
    sameDims(fields.shape, record.shape.tensors[n].shape);
}

/**
 * Checks `data` against the record and reads each leaf's bytes and arena
 * into its columns (and each group's state); returns the number of values
 * passed through.
 *
 * @throws {TypeError} / {Error} with the path where they differ (see {@linkcode leafThrower})
 */
export function readData(record: IntoRecord, data: unknown, into: object): number {
  const { columns, groupState, groupArena, groupDelta, groupOf, offsets, views, codes } = record;
  const { known } = record;
  // (frozen.data is an object, or undefined: undefined data takes the check, and fails it.)
  let passes = data === record.frozen.data && data !== undefined ? frozenPasses(record, into) : -1;
  if (passes < 0) passes = checkData(record, data, into);
  if (sameLeaves(known, columns.sources, record.views, record.byteLengths)) {
    readCounts.same++;
    return passes;
  }
  readCounts.full++;
  // Until this read completes, its columns are half filled.
  startRead(known);
  groupState.fill(UNSET);
  const { sources } = columns;
  const { dtypes, byteLengths } = record;
  const tensors = record.shape.tensors;
  record.ledger.pinned.length = 0;
  for (let n = 0; n < sources.length; n++) {
    // The checks of leafProblem, inline, on the path of a leaf that fits,
    // reading only what they compare (readLeaf's fields, written per
    // leaf, cost the copy of a 528-leaf batch from an arena ~12 % on the
    // H100); an empty leaf, which may be detached, takes the slow path.
    const x = sources[n];
    let arena: ArenaMemory | undefined;
    let view: TypedArray | undefined;
    if (x instanceof Tensor) {
      view = tensorInternals.hostView(x, dtypes[n], byteLengths[n], tensors[n].shape);
      if (view !== undefined) {
        arena = tensorInternals.arena(x);
        // Arena leaves too: a group whose leaves do not all lie in one arena
        // as the result does is packed, theirs included. (Kept by the tensor
        // once read: no lookup per copy.)
        codes[n] = tensorInternals.code(x, view);
      }
    } else if (
      isLeafArray(x) && viewByteLength(x) === byteLengths[n] && byteLengths[n] !== 0 &&
      tensors[n].shape.length === 1
    ) {
      const code = arrayCodeOf(x);
      if (CODE_DTYPE[code] === dtypes[n]) {
        view = x as TypedArray;
        arena = arenaOf(view);
        codes[n] = code;
      }
    }
    noteLeaf(known, n, x, view);
    if (view === undefined) {
      // Anything else (a misfit, an empty or pinned leaf) takes the slow path.
      const problem = leafProblem(record, n, x);
      if (typeof problem === "number" && problem !== FITS_OUTSIDE_ARENA) {
        // The generic walk says where (and throws).
        matchShape(record.shape, data, into, columns, leafThrower(record));
        throw new TypeError("Invalid option into: the data does not match the result");
      }
      arena = problem === FITS_OUTSIDE_ARENA ? undefined : problem as ArenaMemory | undefined;
      // (leafProblem recorded its bytes.)
      codes[n] = arrayCodeOf(views[n]!);
    } else {
      views[n] = view;
    }
    const g = groupOf[n];
    if (g < 0) continue;
    if (arena === undefined) {
      groupState[g] = PACK;
      continue;
    }
    const delta = viewByteOffset(views[n]!) - offsets[n];
    const state = groupState[g];
    if (state === UNSET) {
      groupState[g] = DIRECT;
      groupArena[g] = arena;
      groupDelta[g] = delta;
    } else if (state === DIRECT && (groupArena[g] !== arena || groupDelta[g] !== delta)) {
      groupState[g] = PACK;
    }
  }
  known.complete = true;
  return passes;
}

/**
 * The data's structure checked against the result's (compiled, else
 * generic), its leaves and the values it passes through written into the
 * columns; returns the number of values passed through. A root met a
 * second time in a row is checked deep-frozen first (frozen.ts): where it
 * is, its next copies skip this check.
 *
 * @throws {TypeError} / {Error} with the path where they differ
 */
function checkData(record: IntoRecord, data: unknown, into: object): number {
  const { check, columns, known, frozen } = record;
  // The columns are rewritten from here on.
  known.sameSources = false;
  if (data !== frozen.data) frozen.data = undefined;
  const again = data === frozen.seen;
  if (!again) frozen.decided = undefined;
  // Before the check reads it: what it reads of a frozen root is final.
  let deepFrozen = false;
  if (
    again && data !== frozen.decided && check !== undefined && typeof data === "object" &&
    data !== null && frozenPathReady()
  ) {
    frozen.decided = data;
    // (null: the result-only check did not fit the compiled code's budget.)
    deepFrozen = frozenAlong(record.shape.root, data) &&
      (frozen.checkResult ??= compileCheck(record.shape, true) ?? null) !== null;
  }
  const passes = check === undefined ? -1 : check(data, into, columns);
  if (passes >= 0) {
    frozen.seen = data;
    if (deepFrozen) {
      frozen.data = data;
      frozen.passes = passes;
    }
    return passes;
  }
  // The generic check writes the columns of the leaves it reads (and may
  // throw midway): what the last read recorded no longer stands.
  known.complete = false;
  frozen.data = frozen.seen = undefined;
  return matchShape(record.shape, data, into, columns, leafThrower(record));
}

/**
 * The values passed through by the frozen data root the columns were
 * filled from (frozen.ts), without reading it again: where the result
 * still holds its tensors (read by the result-only check, or not at all
 * for a deep-frozen result); -1 where the full check must run.
 */
function frozenPasses(record: IntoRecord, into: object): number {
  const { frozen } = record;
  // The compiled check leaves data to the generic one while Object.prototype
  // has enumerable keys (its for-in would list them); so does this path.
  if (!noInheritedKeys()) return -1;
  if (frozen.resultFrozen) {
    // Freezing fixes which values pass through, not what they are: the full
    // check's test again (a value's prototype may have changed since). (The
    // result-only check tests them at their places, after the result's code.)
    const { passValues } = record.columns;
    try {
      for (let m = 0; m < frozen.passes; m++) {
        const v = passValues[m];
        if (typeof v === "object" && v !== null && isWalked(v)) return -1;
      }
    } catch {
      return -1;
    }
    frozenCounts.structure++;
    frozenCounts.result++;
    return frozen.passes;
  }
  // Before the result-only check reads it, as for the data (once).
  let deepFrozen = false;
  if (!frozen.resultTried) {
    frozen.resultTried = true;
    deepFrozen = frozenAlong(record.shape.root, into);
  }
  const passes = frozen.checkResult!(undefined, into, record.columns);
  if (passes !== frozen.passes) return -1;
  if (deepFrozen) frozen.resultFrozen = true;
  frozenCounts.structure++;
  return passes;
}

/**
 * Checks the data's leaf `x` at position `n` and records its bytes in
 * `record.views[n]`: returns the arena it lies in where it fits and lies in
 * one, {@linkcode FITS_OUTSIDE_ARENA} where it fits otherwise, else a
 * problem code. (The result's own tensors are checked by their storages'
 * holds, and here for the error's path.) A pinned CPU tensor (a result of
 * a copy to the CPU) is read through a view, its storage held while read.
 */
export function leafProblem(
  record: IntoRecord,
  n: number,
  x: unknown,
): ArenaMemory | number | undefined {
  const tensor = record.shape.tensors[n];
  if (tensorInternals.storage(tensor) !== record.storages[n] || tensor.disposed) {
    return DISPOSED_OUTPUT;
  }
  if (x instanceof Tensor) {
    readLeaf(x, FIELDS);
    if (FIELDS.device !== CPU) return ON_CUDA;
    if (!fits(record, n, FIELDS)) return MISFIT;
    const data = tensorInternals.walkData(x);
    if (data === REJECTED_LEAF) return x.disposed ? DISPOSED_INPUT : DETACHED;
    if (data === undefined) {
      record.views[n] = x.toTypedArray();
      record.ledger.pinned.push(FIELDS.storage!);
      return FITS_OUTSIDE_ARENA;
    }
    record.views[n] = data;
    return FIELDS.arena ?? FITS_OUTSIDE_ARENA;
  }
  if (!isLeafArray(x)) return MISFIT;
  const view = x as TypedArray;
  readLeaf(view, FIELDS);
  if (FIELDS.dtype !== record.dtypes[n] || tensor.shape.length !== 1) return MISFIT;
  // A detached view reads as empty: refused as detached whatever length it had.
  if (FIELDS.byteLength === 0 && isDetached(view)) return DETACHED;
  if (!fits(record, n, FIELDS)) return MISFIT;
  record.views[n] = view;
  return FIELDS.arena ?? FITS_OUTSIDE_ARENA;
}

/**
 * The generic walk's leaf check over `record`: throws the error of a leaf
 * that does not fit (nothing for one that does).
 */
export function leafThrower(record: IntoRecord): LeafCheck {
  return (n: number, x: unknown, path: () => string): void => {
    const problem = leafProblem(record, n, x);
    if (typeof problem !== "number" || problem === FITS_OUTSIDE_ARENA) return;
    const tensor = record.shape.tensors[n];
    switch (problem) {
      case DISPOSED_OUTPUT:
        throw new Error(`Cannot copy into this result: its tensor at ${path()} was disposed`);
      case DISPOSED_INPUT:
        throw new Error(`Cannot copy a disposed tensor at ${path()}`);
      case DETACHED:
        throw new TypeError(`Cannot copy a detached or shrunk ArrayBuffer at ${path()}`);
      case ON_CUDA:
        throw new TypeError(
          `Invalid option into: expected CPU data at ${path()} (a copy into a result reads TypedArrays and CPU tensors), got ${
            describe(x)
          }`,
        );
      default:
        throw new TypeError(
          `Invalid option into: expected a ${tensor.dtype} tensor of shape [${
            tensor.shape.join(", ")
          }] (or a TypedArray of that dtype and length) at ${path()}, got ${describe(x)}`,
        );
    }
  };
}
