/**
 * CPU → CUDA into an earlier result, in place (`startCopy`'s `into`
 * option): no containers, tensors or device memory made; the data's bytes
 * go where the result's tensors lie.
 *
 * The result's tensors are grouped by the storage (device block) they lie
 * in: a packed chunk, an arena run, or an unpacked tensor's own block. Each
 * group is one DMA to the range its tensors cover in the block. Where every
 * leaf of a group lies in one host arena at one distance from its place in
 * the block (a batch built in an arena at the offsets of the last one), the
 * DMA reads the arena itself; else the leaves are packed into pinned
 * staging at their places in the block (large single leaves are staged in
 * the background, as by the ordinary path).
 *
 * Note [Writing into memory others may read]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A result's memory is written only where nothing else can see it: each
 * storage must have exactly the holds of the result's own tensors (all
 * live), of kernel launches in flight and of library copies in flight that
 * read it (reuse/holders.ts); any other hold (a tensor sharing the memory)
 * refuses the copy. Library copies run on the device's copy stream, so the
 * DMAs queued here follow them; launches run on other streams, so the copy
 * stream waits for each launch holding the memory on the GPU first (as
 * `after` orders a copy), and for `after`'s items. The copy holds each
 * storage until it settles.
 *
 * @module
 */

import { copyAsync, copyFromBuffer } from "../../ffi/native.ts";
import { type ArenaMemory, arenaOf } from "../arena_index.ts";
import { ARRAY_CLASSES, arrayCodeOf, CODE_BYTES, CODE_DTYPE, NO_CODE } from "../array_code.ts";
import { type AsyncCopyHandle, createCopyHandle, reapFinished } from "../copy_handle.ts";
import { CPU, deviceName } from "../device.ts";
import { type DType, isDetached, type TypedArray } from "../dtype.ts";
import { type After, orderCopyAfter } from "../gpu/after.ts";
import type { GpuWork } from "../gpu/work.ts";
import { pinnedView } from "../memory/pinned_memory.ts";
import type { Storage } from "../memory/storage.ts";
import type { ResolvedOptions } from "../options.ts";
import { copiesReading, worksHolding } from "../reuse/holders.ts";
import { compileCheck, type CompiledCheck } from "../reuse/into_code.ts";
import {
  buildShape,
  describe,
  type IntoShape,
  isLeafArray,
  type MatchColumns,
  matchShape,
} from "../reuse/into_shape.ts";
import { type ResultEntry, resultEntry } from "../reuse/results.ts";
import { BACKGROUND_MIN_BYTES } from "../staging/background.ts";
import {
  REJECTED_LEAF,
  Tensor,
  type TensorFields,
  tensorFields,
  tensorInternals,
} from "../tensor.ts";
import type { LedgerRoute } from "./ledger_ops.ts";
import { Submission } from "./submission.ts";

/**
 * Test switch: whether a copy into a result waits on the GPU for the
 * launches that hold its memory (Note [Writing into memory others may
 * read]). Off only in the test that shows the race it prevents.
 */
export const intoOrdering = { afterHolders: true };

/** One storage of a result and its tensors. */
interface Group {
  readonly storage: Storage;
  /** The leaf positions of its tensors. */
  readonly leaves: number[];
  /** The byte range its tensors cover in the block. */
  lo: number;
  hi: number;
}

/** What copies into one result need, built at the first one. */
interface IntoRecord {
  readonly shape: IntoShape;
  readonly check: CompiledCheck | undefined;
  readonly columns: MatchColumns;
  readonly dtypes: readonly DType[];
  readonly byteLengths: Float64Array;
  /** Whether the tensor is one-dimensional (a TypedArray leaf fits only then). */
  readonly vector: Uint8Array;
  /** The storage each tensor lies in (undefined for an empty tensor without one). */
  readonly storages: readonly (Storage | undefined)[];
  /** Each tensor's byte offset in its storage's block, and its group (-1: none). */
  readonly offsets: Float64Array;
  readonly groupOf: Int32Array;
  readonly groups: readonly Group[];
  readonly bytes: number;
  readonly ledger: LedgerRoute & { pinned: Storage[] };
  // Per copy, reused: each leaf's bytes (a view) and arena; each group's state.
  readonly views: (TypedArray | undefined)[];
  readonly groupArena: (ArenaMemory | undefined)[];
  readonly groupDelta: Float64Array;
  readonly groupState: Uint8Array;
}

// Group states of one copy.
const UNSET = 0;
const DIRECT = 1;
const PACK = 2;

// Leaf problems (see leafProblem).
const MISFIT = 1;
const ON_CUDA = 2;
const DISPOSED_INPUT = 3;
const DETACHED = 4;
const DISPOSED_OUTPUT = 5;

const FIELDS: TensorFields = tensorFields();

/**
 * Starts copying `data` (CPU leaves) into `into`, a result of an earlier
 * copy to device `target`, in place (see `StartCopyOptions.into`).
 *
 * @throws {TypeError} where `data` does not match `into`, or for a CPU target
 * @throws {Error} where `into` cannot be written (Note [Writing into memory others may read])
 */
export function startCopyInto(
  data: unknown,
  target: number,
  options: ResolvedOptions,
  into: object,
  after: readonly After[] | undefined,
): AsyncCopyHandle<unknown> {
  if (target === CPU) {
    throw new TypeError(
      'Invalid option into: copies into an earlier result go to a CUDA device, got device "cpu"',
    );
  }
  const entry = resultEntry(into, target);
  if (entry.busy) {
    throw new Error(
      "Cannot copy into a result that a copy into it is still writing: await that copy's get() first",
    );
  }
  const record = (entry.record ??= buildRecord(into, entry)) as IntoRecord;
  const passes = checkData(record, data, into);
  const works = checkHolds(record);
  const items = after === undefined && works.length === 0
    ? undefined
    : [...(after ?? []), ...works];
  const ordered = items === undefined ? undefined : orderCopyAfter(items, [target]);
  // Nothing can throw for the caller's arguments past this point: the
  // values passed through are written, and the result is taken.
  const { passContainers, passKeys, passValues } = record.columns;
  for (let m = 0; m < passes; m++) {
    const container = passContainers[m];
    if (container instanceof Map) container.set(passKeys[m], passValues[m]);
    else (container as Record<PropertyKey, unknown>)[passKeys[m] as PropertyKey] = passValues[m];
  }
  return submitInto(record, entry, into, target, options, ordered);
}

/**
 * The record of `result` (see {@linkcode IntoRecord}). Its tensors must be
 * on the target, in device memory; whether anything else sees that memory
 * is checked at each copy (Note [Writing into memory others may read]).
 */
function buildRecord(result: object, entry: ResultEntry): IntoRecord {
  const device = deviceName(entry.device);
  const shape = buildShape(result, (tensor) => {
    if (tensor.disposed) return "is a disposed tensor";
    if (tensorInternals.device(tensor) !== entry.device) {
      return `is a tensor on ${tensor.device}, not ${device}`;
    }
    if (tensorInternals.storage(tensor) === undefined && tensor.byteLength > 0) {
      return "is a tensor the library does not own the memory of";
    }
    return undefined;
  });
  if (typeof shape === "string") {
    throw new Error(
      `Cannot copy into this value: ${shape} (a result of startCopy(...).get() to ${device} is expected)`,
    );
  }
  const { tensors } = shape;
  const n = tensors.length;
  const dtypes: DType[] = [];
  const byteLengths = new Float64Array(n);
  const vector = new Uint8Array(n);
  const storages: (Storage | undefined)[] = [];
  const offsets = new Float64Array(n);
  const groupOf = new Int32Array(n).fill(-1);
  const groups: Group[] = [];
  const byStorage = new Map<Storage, number>();
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const tensor = tensors[i];
    tensorInternals.read(tensor, FIELDS);
    dtypes.push(FIELDS.dtype);
    byteLengths[i] = FIELDS.byteLength;
    vector[i] = FIELDS.shape.length === 1 ? 1 : 0;
    bytes += FIELDS.byteLength;
    const storage = FIELDS.storage;
    storages.push(storage);
    if (tensor.disposed) {
      throw new Error(`Cannot copy into this result: its tensor ${i} was disposed`);
    }
    if (storage === undefined) continue; // an empty tensor
    const offset = tensorInternals.address(tensor) - storage.address;
    offsets[i] = offset;
    let g = byStorage.get(storage);
    if (g === undefined) {
      byStorage.set(storage, g = groups.length);
      groups.push({ storage, leaves: [], lo: offset, hi: offset + FIELDS.byteLength });
    }
    const group = groups[g];
    group.leaves.push(i);
    group.lo = Math.min(group.lo, offset);
    group.hi = Math.max(group.hi, offset + FIELDS.byteLength);
    groupOf[i] = g;
  }
  const ledger = {
    tensors: n,
    bytes,
    target: entry.device,
    // Nothing is disposed when a copy into a result fails: the result keeps its memory.
    outputs: [],
    arenas: [],
    pinned: [] as Storage[],
    inputStorages(): readonly Storage[] {
      return this.pinned;
    },
    captureSources(): void {},
  };
  return {
    shape,
    check: compileCheck(shape),
    columns: {
      sources: new Array(n).fill(undefined),
      passContainers: [],
      passKeys: [],
      passValues: [],
    },
    dtypes,
    byteLengths,
    vector,
    storages,
    offsets,
    groupOf,
    groups,
    bytes,
    ledger,
    views: new Array(n).fill(undefined),
    groupArena: new Array(groups.length).fill(undefined),
    groupDelta: new Float64Array(groups.length),
    groupState: new Uint8Array(groups.length),
  };
}

/**
 * Checks `data` against the record and reads each leaf's bytes and arena
 * into its columns; returns the number of values passed through.
 *
 * @throws {TypeError} / {Error} with the path where they differ
 */
function checkData(record: IntoRecord, data: unknown, into: object): number {
  const { columns, check, groupState, groupArena, groupDelta, groupOf, offsets } = record;
  let passes = check === undefined ? -1 : check(data, into, columns);
  if (passes < 0) passes = matchShape(record.shape, data, into, columns, leafThrower(record));
  groupState.fill(UNSET);
  const { sources } = columns;
  const { views, dtypes, byteLengths, vector } = record;
  const tensors = record.shape.tensors;
  record.ledger.pinned.length = 0;
  for (let n = 0; n < sources.length; n++) {
    // The checks of leafProblem, inline, on the path of a leaf that fits.
    const x = sources[n];
    let arena: ArenaMemory | undefined;
    let view: TypedArray | undefined;
    if (x instanceof Tensor) {
      const data = tensorInternals.walkData(x);
      if (
        data === undefined || data === REJECTED_LEAF || tensorInternals.device(x) !== CPU ||
        x.dtype !== dtypes[n] || x.byteLength !== byteLengths[n] ||
        !sameShape(x.shape, tensors[n].shape)
      ) {
        view = undefined;
      } else {
        view = data;
        arena = tensorInternals.arena(x);
      }
    } else if (
      ArrayBuffer.isView(x) && vector[n] === 1 && x.byteLength === byteLengths[n] &&
      x.byteLength !== 0 && CODE_DTYPE[arrayCodeOf(x)] === dtypes[n]
    ) {
      view = x as TypedArray;
      arena = arenaOf(view);
    }
    if (view === undefined) {
      // Anything else (a misfit, an empty or pinned leaf) takes the slow path.
      const problem = leafProblem(record, n, x);
      if (typeof problem === "number" && problem !== FITS_OUTSIDE_ARENA) {
        // The generic walk says where (and throws).
        matchShape(record.shape, data, into, columns, leafThrower(record));
        throw new TypeError("Invalid option into: the data does not match the result");
      }
      arena = problem === FITS_OUTSIDE_ARENA ? undefined : problem as ArenaMemory | undefined;
    } else {
      views[n] = view;
    }
    const g = groupOf[n];
    if (g < 0) continue;
    if (arena === undefined) {
      groupState[g] = PACK;
      continue;
    }
    const delta = views[n]!.byteOffset - offsets[n];
    const state = groupState[g];
    if (state === UNSET) {
      groupState[g] = DIRECT;
      groupArena[g] = arena;
      groupDelta[g] = delta;
    } else if (state === DIRECT && (groupArena[g] !== arena || groupDelta[g] !== delta)) {
      groupState[g] = PACK;
    }
  }
  return passes;
}

/** What {@linkcode leafProblem} returns for a leaf that fits and lies outside any arena. */
const FITS_OUTSIDE_ARENA = -1;

/**
 * Checks the data's leaf `x` at position `n` and records its bytes: the
 * arena it lies in where it fits and lies in one, {@linkcode FITS_OUTSIDE_ARENA}
 * where it fits otherwise, else a problem code. (The result's own tensors
 * are checked by their storages' holds, and here for the error's path.)
 */
function leafProblem(record: IntoRecord, n: number, x: unknown): ArenaMemory | number | undefined {
  const tensor = record.shape.tensors[n];
  if (tensorInternals.storage(tensor) !== record.storages[n] || tensor.disposed) {
    return DISPOSED_OUTPUT;
  }
  const bytes = record.byteLengths[n];
  if (x instanceof Tensor) {
    tensorInternals.read(x, FIELDS);
    if (FIELDS.device !== CPU) return ON_CUDA;
    if (FIELDS.dtype !== record.dtypes[n] || FIELDS.byteLength !== bytes) return MISFIT;
    if (!sameShape(FIELDS.shape, tensor.shape)) return MISFIT;
    const data = tensorInternals.walkData(x);
    if (data === REJECTED_LEAF) return x.disposed ? DISPOSED_INPUT : DETACHED;
    if (data === undefined) {
      // Pinned memory (a result of a copy to the CPU): read through a view; held while read.
      record.views[n] = x.toTypedArray();
      record.ledger.pinned.push(FIELDS.storage!);
      return FITS_OUTSIDE_ARENA;
    }
    record.views[n] = data;
    return FIELDS.arena ?? FITS_OUTSIDE_ARENA;
  }
  const code = arrayCodeOf(x as ArrayBufferView);
  if (code === NO_CODE || !isLeafArray(x)) return MISFIT;
  if (CODE_DTYPE[code] !== record.dtypes[n] || record.vector[n] === 0) return MISFIT;
  const view = x as TypedArray;
  if (view.byteLength !== bytes) {
    return view.byteLength === 0 && isDetached(view) ? DETACHED : MISFIT;
  }
  if (bytes === 0 && isDetached(view)) return DETACHED;
  record.views[n] = view;
  // (Looked up per copy, as the route does for raw TypedArray leaves.)
  return arenaOf(view) ?? FITS_OUTSIDE_ARENA;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The generic walk's leaf check: throws the error of a leaf that does not fit. */
function leafThrower(record: IntoRecord) {
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

/**
 * The launches that hold the result's memory, for the copy to wait for;
 * throws where anything else holds it (Note [Writing into memory others
 * may read]).
 */
function checkHolds(record: IntoRecord): GpuWork[] {
  reapFinished();
  let works: GpuWork[] | undefined;
  for (const { storage, leaves } of record.groups) {
    const holding = worksHolding(storage);
    const expected = leaves.length + holding.length + copiesReading(storage);
    if (storage.holds !== expected) {
      for (const n of leaves) {
        if (record.shape.tensors[n].disposed) {
          throw new Error(
            `Cannot copy into this result: its tensor ${n} (in the walk's order) was disposed`,
          );
        }
      }
      throw new Error(
        `Cannot copy into this result: something else holds its memory (${
          storage.holds - expected
        } more hold${
          storage.holds - expected === 1 ? "" : "s"
        }: a tensor over the same memory: the result copied to its own device, a tensor that was on the target already and was shared into the result, tensors of the same copy left out of this value; or a copy waiting to read it); dispose it, or await that copy, first`,
      );
    }
    if (holding.length > 0 && intoOrdering.afterHolders) {
      works ??= [];
      for (const work of holding) if (!works.includes(work)) works.push(work);
    }
  }
  return works ?? NO_WORKS;
}

const NO_WORKS: GpuWork[] = [];

/** Queues the copy (once `ordered` settles, where given) and makes its handle. */
function submitInto(
  record: IntoRecord,
  entry: ResultEntry,
  into: object,
  target: number,
  options: ResolvedOptions,
  ordered: Promise<void> | undefined,
): AsyncCopyHandle<unknown> {
  const stats = Submission.emptyStats(record.ledger);
  const submission = new Submission(record.ledger, stats);
  submission.involve(target);
  const { groups } = record;
  for (let g = 0; g < groups.length; g++) groups[g].storage.retain();
  entry.busy = true;
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    entry.busy = false;
    for (let g = 0; g < groups.length; g++) groups[g].storage.release();
  };
  let job: ReturnType<Submission["job"]> | undefined;
  let submitted: Promise<void> | undefined;
  const events: { device: number; event: number }[] = [];
  try {
    // Packing reads the data now (the caller may change it once get() resolves).
    // A copy queued later packs into pinned staging whatever the options say:
    // a pageable copy would be queued now, before the waits it must follow.
    const transfers = prepare(record, submission, target, options, ordered === undefined);
    if (ordered === undefined) {
      queue(transfers, target);
      job = submission.job(() => {});
      submitted = job.submitted;
      events.push(...job.events);
    } else {
      submitted = ordered.then(async () => {
        queue(transfers, target);
        job = submission.job(() => {});
        events.push(...job.events);
        if (job.submitted) await job.submitted;
      });
    }
  } catch (error) {
    // The handle fails at once and aborts: the ledger drains and gives back what it took.
    submitted = Promise.reject(error);
  }
  return createCopyHandle<unknown>({
    events,
    submitted,
    stats,
    outputs: into,
    complete: () => {
      try {
        job!.complete();
      } finally {
        settle();
      }
      return into;
    },
    abort: () => {
      if (job) job.abort();
      else submission.abort();
      settle();
    },
  });
}

/** The DMAs of one copy: destination, source and bytes, three numbers each. */
type Transfers = number[];

/**
 * Packs what must be packed and lists the DMAs (a direct one from an arena
 * for each group that lies in one as the result does); large single leaves
 * go to background staging where `background` allows.
 */
function prepare(
  record: IntoRecord,
  submission: Submission,
  target: number,
  options: ResolvedOptions,
  now: boolean,
): Transfers {
  const { groups, groupState, groupArena, groupDelta, views, offsets } = record;
  const transfers: Transfers = [];
  let heldArena: ArenaMemory | undefined;
  const { stats } = submission;
  const pinned = options.usePinnedStaging || !now;
  for (let g = 0; g < groups.length; g++) {
    const { storage, leaves, lo, hi } = groups[g];
    const span = hi - lo;
    if (span === 0) continue;
    if (leaves.length > 1) {
      stats.chunks++;
      stats.packedTensors += leaves.length;
    }
    const dst = storage.address + lo;
    if (groupState[g] === DIRECT) {
      const arena = groupArena[g]!;
      if (arena !== heldArena) submission.holdArena(heldArena = arena);
      transfers.push(dst, arena.address + lo + groupDelta[g], span);
      stats.copies++;
      continue;
    }
    if (leaves.length === 1) {
      const n = leaves[0];
      const view = views[n]!;
      if (now && options.useBackgroundThread && pinned && span >= BACKGROUND_MIN_BYTES) {
        const buffer = view.buffer as ArrayBuffer & { growable?: boolean };
        if (buffer.resizable !== true && buffer.growable !== true) {
          submission.stageInBackground({ device: target, dst, src: view, bytes: span });
          stats.copies++;
          continue;
        }
      }
    }
    if (!pinned) {
      for (const n of leaves) {
        const view = views[n]!;
        if (view.byteLength === 0) continue;
        copyFromBuffer({ device: target, dst: storage.address + offsets[n], src: view });
        stats.copies++;
      }
      continue;
    }
    const stage = submission.takeStaging(span);
    for (let k = 0; k < leaves.length; k++) {
      const n = leaves[k];
      const view = views[n]!;
      if (view.byteLength === 0) continue;
      const at = offsets[n] - lo;
      const code = arrayCodeOf(view);
      const size = CODE_BYTES[code];
      if (at % size === 0) {
        pinnedView(stage, ARRAY_CLASSES[code]).set(view as never, at / size);
      } else {
        (pinnedView(stage, Uint8Array) as Uint8Array).set(
          new Uint8Array(view.buffer, view.byteOffset, view.byteLength),
          at,
        );
      }
    }
    transfers.push(dst, stage.address, span);
    stats.copies++;
  }
  return transfers;
}

/** Queues the DMAs on the copy stream of `target`. */
function queue(transfers: Transfers, target: number): void {
  for (let t = 0; t < transfers.length; t += 3) {
    copyAsync({
      device: target,
      dst: transfers[t],
      src: transfers[t + 1],
      bytes: transfers[t + 2],
    });
  }
}
