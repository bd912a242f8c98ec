/**
 * What copies into one result need, read from the result at the first such
 * copy (`startCopy`'s `into` option): its structure and its compiled check,
 * each tensor's dtype, bytes and place, and its tensors grouped by the
 * storage (device block) they lie in: a packed chunk, an arena run, or an
 * unpacked tensor's own block. Each group is one DMA per copy, to the
 * range its tensors cover in the block. The record also keeps the columns
 * each copy fills (reused: a copy into a result allocates nothing per leaf).
 *
 * @module
 */

import type { ArenaMemory } from "../../arena_index.ts";
import { deviceName } from "../../device.ts";
import type { DType, TypedArray } from "../../dtype.ts";
import type { Storage } from "../../memory/storage.ts";
import { compileCheck, type CompiledCheck } from "../../reuse/into_code.ts";
import type { MatchColumns } from "../../reuse/into_match.ts";
import { buildShape, type IntoShape } from "../../reuse/into_shape.ts";
import { type TensorFields, tensorFields, tensorInternals } from "../../tensor.ts";
import type { LedgerRoute } from "../ledger_ops.ts";
import { frozenPathReady, type FrozenReads, frozenReads } from "./frozen.ts";
import { type KnownLeaves, knownLeaves } from "./known.ts";

/** One storage of a result and its tensors. */
export interface Group {
  readonly storage: Storage;
  /** The leaf positions of its tensors. */
  readonly leaves: number[];
  /** The byte range its tensors cover in the block. */
  lo: number;
  hi: number;
  /**
   * The storage's `disposals` when the holds check last found every tensor
   * of the result alive (-1: never).
   */
  checkedDisposals: number;
}

/** What copies into one result need, built at the first one. */
export interface IntoRecord {
  readonly shape: IntoShape;
  readonly check: CompiledCheck | undefined;
  readonly columns: MatchColumns;
  readonly dtypes: readonly DType[];
  readonly byteLengths: Float64Array;
  /** The storage each tensor lies in (undefined for an empty tensor without one). */
  readonly storages: readonly (Storage | undefined)[];
  /** Each tensor's byte offset in its storage's block, and its group (-1: none). */
  readonly offsets: Float64Array;
  readonly groupOf: Int32Array;
  readonly groups: readonly Group[];
  /** The positions of the tensors in no group (empty ones, with no storage). */
  readonly ungrouped: readonly number[];
  readonly bytes: number;
  /** The copy's ledger: it holds only the pinned inputs it reads (`pinned`). */
  readonly ledger: LedgerRoute & { pinned: Storage[] };
  // Per copy, reused: each leaf's bytes (a view), its class code
  // (array_code.ts) and arena; each group's state.
  readonly views: (TypedArray | undefined)[];
  readonly codes: Uint8Array;
  readonly groupArena: (ArenaMemory | undefined)[];
  readonly groupDelta: Float64Array;
  readonly groupState: Uint8Array;
  /** The leaves of the last complete read, which the columns above describe (known.ts). */
  readonly known: KnownLeaves;
  /** The frozen data root whose structure is not read again (frozen.ts). */
  readonly frozen: FrozenReads;
}

/** A group's state in one copy: no leaf with bytes seen yet. */
export const UNSET = 0;
/** Every leaf so far lies in one arena at one distance from its place: one DMA from the arena. */
export const DIRECT = 1;
/** The group's leaves are packed into pinned staging (or copied one by one). */
export const PACK = 2;

const FIELDS: TensorFields = tensorFields();

/**
 * The record of `result`, whose tensors must all be on device `device`, in
 * memory the library owns; whether anything else sees that memory is
 * checked at each copy (holds.ts).
 *
 * @throws {Error} "Cannot copy into this value: …" where `result` is not such a result
 */
export function buildRecord(result: object, device: number): IntoRecord {
  const name = deviceName(device);
  const shape = buildShape(result, (tensor) => {
    if (tensor.disposed) return "is a disposed tensor";
    if (tensorInternals.device(tensor) !== device) {
      return `is a tensor on ${tensor.device}, not ${name}`;
    }
    if (tensorInternals.storage(tensor) === undefined && tensor.byteLength > 0) {
      return "is a tensor the library does not own the memory of";
    }
    return undefined;
  });
  if (typeof shape === "string") {
    throw new Error(
      `Cannot copy into this value: ${shape} (a result of startCopy(...).get() to ${name} is expected)`,
    );
  }
  // (What the frozen path needs loads meanwhile: frozen.ts.)
  frozenPathReady();
  const { tensors } = shape;
  const n = tensors.length;
  const dtypes: DType[] = [];
  const byteLengths = new Float64Array(n);
  const storages: (Storage | undefined)[] = [];
  const offsets = new Float64Array(n);
  const groupOf = new Int32Array(n).fill(-1);
  const ungrouped: number[] = [];
  const groups: Group[] = [];
  const byStorage = new Map<Storage, number>();
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const tensor = tensors[i];
    tensorInternals.read(tensor, FIELDS);
    dtypes.push(FIELDS.dtype);
    byteLengths[i] = FIELDS.byteLength;
    bytes += FIELDS.byteLength;
    const storage = FIELDS.storage;
    storages.push(storage);
    if (storage === undefined) {
      ungrouped.push(i); // an empty tensor
      continue;
    }
    const offset = tensorInternals.address(tensor) - storage.address;
    offsets[i] = offset;
    let g = byStorage.get(storage);
    if (g === undefined) {
      byStorage.set(storage, g = groups.length);
      groups.push({
        storage,
        leaves: [],
        lo: offset,
        hi: offset + FIELDS.byteLength,
        checkedDisposals: -1,
      });
    }
    const group = groups[g];
    group.leaves.push(i);
    group.lo = Math.min(group.lo, offset);
    group.hi = Math.max(group.hi, offset + FIELDS.byteLength);
    groupOf[i] = g;
  }
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
    storages,
    offsets,
    groupOf,
    groups,
    ungrouped,
    bytes,
    ledger: intoLedger(n, bytes, device),
    views: new Array(n).fill(undefined),
    codes: new Uint8Array(n),
    groupArena: new Array(groups.length).fill(undefined),
    groupDelta: new Float64Array(groups.length),
    groupState: new Uint8Array(groups.length),
    known: knownLeaves(n),
    frozen: frozenReads(),
  };
}

/** The ledger of copies into a result of `tensors` tensors and `bytes` bytes on `device`. */
function intoLedger(tensors: number, bytes: number, device: number): IntoRecord["ledger"] {
  return {
    tensors,
    bytes,
    target: device,
    // Nothing is disposed when a copy into a result fails: the result keeps its memory.
    outputs: [],
    arenas: [],
    pinned: [] as Storage[],
    inputStorages(): readonly Storage[] {
      return this.pinned;
    },
    captureSources(): void {},
  };
}
