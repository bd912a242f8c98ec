/**
 * Packing on the main thread: the bytes of CPU leaves copied into staging
 * memory (a pinned block, or one reusable pageable buffer without pinned
 * staging) at the places a chunk plan gives them, one typed `set` each.
 *
 * Staging is the one room that fills pinned memory: this file (small
 * chunks and single tensors, by `set`), parallel_pack.ts (large chunks, by
 * native threads) and background.ts (large tensors, off the main thread).
 * The transfer files decide what goes where and queue the DMAs. What a pack
 * reads is described here as interfaces (the route and the chunk plans
 * have these shapes), so that staging needs nothing above it.
 *
 * @module
 */

import { ARRAY_CLASSES, arrayCodeOf, CODE_BYTES, CODE_SHIFT, NO_CODE } from "../array_code.ts";
import type { TypedArray, TypedArrayConstructor } from "../dtype.ts";
import type { Block } from "../memory/block_pool_types.ts";
import { pinnedView } from "../memory/pinned_memory.ts";

/**
 * The leaves a pack reads (the route of a copy has this shape): by leaf
 * index, the host bytes the walk read (or undefined where they must be
 * asked for again), and the output each stands for; by position among the
 * CPU→CUDA leaves, each one's class code (array_code.ts), read in the walk.
 */
export interface PackedLeaves {
  /** The host bytes of each leaf as the walk read them, by leaf index. */
  readonly hostData: readonly (TypedArray | undefined)[];
  /** The class code of each CPU→CUDA leaf, by its position among them. */
  readonly codes: { readonly data: ArrayLike<number> };
  /** The outputs, by leaf index: their byte lengths are what must be packed. */
  readonly outputs: readonly { readonly byteLength: number }[];
  /** The bytes of leaf `index`, read now. */
  hostBytes(index: number): TypedArray;
}

/** A chunk's plan (pack_plan.ts has this shape): its members and where each goes. */
export interface PackedChunk {
  /** Positions among the CPU→CUDA leaves. */
  readonly members: ArrayLike<number>;
  /** Each member's offset from the chunk's base. */
  readonly offsets: ArrayLike<number>;
  /** The first payload byte's offset (the staging block holds `start` to `end`). */
  readonly start: number;
  /** One past the last payload byte's offset. */
  readonly end: number;
}

/**
 * The error for a leaf whose view no longer has the bytes the walk found
 * (`bytes`; it views `now`): its buffer was detached or resized (a view
 * that tracks a resizable buffer's length) by user code that ran after
 * the walk read it (a getter later in the walk, or while the copy waited
 * for memory). Staging refuses it: a grown view would write past its
 * place (past its device block, copied from pageable memory), a shrunk one
 * would leave stale bytes there.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { inputChanged } from "./pack.ts";
 * assert.match(inputChanged(16, 0).message, /detached or resized during the copy \(now 0 bytes\)/);
 * ```
 */
export function inputChanged(bytes: number, now: number): TypeError {
  return new TypeError(
    `Cannot copy a tensor of ${bytes} bytes whose buffer was detached or resized during the copy (now ${now} bytes): inputs must not change until get() resolves`,
  );
}

// The packing loop's views of one chunk by class code (reused: no arrays per chunk).
const chunkViews: (TypedArray | undefined)[] = new Array(ARRAY_CLASSES.length).fill(undefined);

/**
 * Packs the members of `plan` (positions in `h2d`) into `stage`, or into
 * the pageable buffer of {@linkcode pageableChunk} without one, by one
 * `set` per member, and marks them in `packed`. The bytes and class of
 * each come from the route's columns, filled in by the walk (the class
 * code picks a view of the chunk of that class, so that the bytes are
 * copied unchanged).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { packBySet, pageableChunk } from "./pack.ts";
 * const a = new Float32Array([1, 2]), b = new Uint8Array([7]);
 * const leaves = { hostData: [a, b], codes: { data: [0, 6] }, outputs: [a, b], hostBytes: (i: number) => [a, b][i] };
 * const packed = new Uint8Array(2);
 * packBySet(leaves, [0, 1], { members: [0, 1], offsets: [0, 16], start: 0, end: 17 }, undefined, packed);
 * assert.deepEqual([...packed], [1, 1]);
 * assert.deepEqual([...pageableChunk(17).subarray(16)], [7]);
 * ```
 */
export function packBySet(
  route: PackedLeaves,
  h2d: ArrayLike<number>,
  plan: PackedChunk,
  stage: Block | undefined,
  packed: Uint8Array,
): void {
  const { members, offsets, start, end } = plan;
  const { hostData, outputs } = route;
  const codes = route.codes.data;
  const views = chunkViews;
  views.fill(undefined);
  for (let m = 0; m < members.length; m++) {
    const k = members[m];
    packed[k] = 1;
    const i = h2d[k];
    let code = codes[k];
    let src = hostData[i];
    if (code === NO_CODE || src === undefined) {
      src = route.hostBytes(i);
      code = arrayCodeOf(src);
    }
    // The view's own property here, not the engine's size (a third slower
    // on a 528-leaf batch): `set` copies what the engine knows and stays in
    // the view of the block, so a property that lies can hide a resize
    // from this check but never make the copy read or write out of bounds.
    const bytes = outputs[i].byteLength;
    if (src.byteLength !== bytes) throw inputChanged(bytes, src.byteLength);
    const view = views[code] ??= stage
      ? pinnedView(stage, ARRAY_CLASSES[code])
      : pageableView(end - start, ARRAY_CLASSES[code]);
    // The element index as a small integer (a shift, not a division into a double).
    const at = offsets[m] - start;
    view.set(src as never, at < 2 ** 31 ? at >> CODE_SHIFT[code] : at / CODE_BYTES[code]);
  }
}

/**
 * Copies `src` into pinned block `stage` at byte `at`: through a view of
 * its own class where `at` is a multiple of its element size, else byte
 * by byte (the bytes unchanged either way).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { viewAddress } from "../../ffi/native.ts";
 * import { packView } from "./pack.ts";
 * const memory = new Uint8Array(8); // stands in for a pinned block: memory seen through its address
 * packView({ address: viewAddress(memory), size: 8 }, 3, new Uint16Array([0x0201]));
 * assert.deepEqual([...memory.subarray(3, 5)], [1, 2]);
 * ```
 */
export function packView(stage: Block, at: number, src: TypedArray): void {
  // The class code (array_code.ts keeps the last one looked up: neighbours
  // mostly share a class), not builtinClassOf's Map lookup per view.
  const code = arrayCodeOf(src);
  const size = CODE_BYTES[code];
  if (at % size === 0) {
    pinnedView(stage, ARRAY_CLASSES[code]).set(src as never, at / size);
  } else {
    (pinnedView(stage, Uint8Array) as Uint8Array).set(
      new Uint8Array(src.buffer, src.byteOffset, src.byteLength),
      at,
    );
  }
}

/**
 * {@linkcode packView} for many leaves into one pinned block: its view of
 * each class is looked up once (`pinnedView` is a lookup in the block's
 * cache: per leaf it cost a copy into an earlier result of the reference
 * batch about a third of its time), and an offset that fits 31 bits is
 * turned into an element index with a shift.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { viewAddress } from "../../ffi/native.ts";
 * import { arrayCodeOf } from "../array_code.ts";
 * import { StageWriter } from "./pack.ts";
 * const memory = new Uint8Array(16); // stands in for a pinned block: memory seen through its address
 * const writer = new StageWriter({ address: viewAddress(memory), size: 16 });
 * const [a, b] = [new Uint16Array([0x0201]), new Uint8Array([7])];
 * writer.write(4, a, arrayCodeOf(a));
 * writer.write(9, b, arrayCodeOf(b));
 * assert.deepEqual([...memory.subarray(4, 6)], [1, 2]);
 * assert.equal(memory[9], 7);
 * ```
 */
export class StageWriter {
  readonly #stage: Block;
  readonly #views: (TypedArray | undefined)[] = new Array(ARRAY_CLASSES.length).fill(undefined);

  /** A writer into pinned block `stage`. */
  constructor(stage: Block) {
    this.#stage = stage;
  }

  /**
   * Copies `src`, of class code `code` (array_code.ts), into the block at
   * byte `at` (as {@linkcode packView} does).
   */
  write(at: number, src: TypedArray, code: number): void {
    // (A view of no TypedArray class, NO_CODE, goes byte by byte.)
    const shift = CODE_SHIFT[code];
    if (shift !== undefined && at < 2 ** 31 && (at & ((1 << shift) - 1)) === 0) {
      const view = this.#views[code] ??= pinnedView(this.#stage, ARRAY_CLASSES[code]);
      view.set(src as never, at >> shift);
    } else {
      packView(this.#stage, at, src);
    }
  }
}

let pageableScratch = new ArrayBuffer(0);
const pageableViews = new Map<unknown, TypedArray>();

/**
 * The first `bytes` of the reusable ordinary (pageable) host buffer that
 * {@linkcode packBySet} packs into without pinned staging. The driver
 * copies from pageable memory before the call returns, so one buffer
 * serves every chunk.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { pageableChunk } from "./pack.ts";
 * assert.equal(pageableChunk(64).byteLength, 64);
 * ```
 */
export function pageableChunk(bytes: number): Uint8Array {
  pageableView(bytes, Uint8Array);
  return new Uint8Array(pageableScratch, 0, bytes);
}

function pageableView(bytes: number, cls: TypedArrayConstructor): TypedArray {
  if (pageableScratch.byteLength < bytes) {
    pageableScratch = new ArrayBuffer(2 ** Math.ceil(Math.log2(bytes)));
    pageableViews.clear();
  }
  let view = pageableViews.get(cls);
  if (!view) pageableViews.set(cls, view = new cls(pageableScratch));
  return view;
}
