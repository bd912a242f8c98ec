/**
 * The route of one copy: which leaves move, in which direction, and the
 * output tensor that stands in for each in the result.
 *
 * The walk feeds it (it is the walk's `LeafSink`): every leaf that moves
 * gets an output `Tensor`, so that the result structure is final from the
 * start, and an index in one of three direction lists (CPU→CUDA,
 * CUDA→other CUDA, CUDA→CPU). A tensor already on the target moves
 * nothing: it gets a new `Tensor` over the same memory, which takes its own
 * hold, so that results never share an instance with the input. With the
 * default alignment it also feeds the sequential packer during the walk
 * (CPU→CUDA leaves: a copy back mostly goes by runs, which need no plan),
 * and the CPU→CUDA leaves it packs (and those in a host arena) get their
 * outputs created already bound to a pending storage at their final
 * offset (see {@linkcode Route.chunkStorage}). The transfer functions bind
 * every other output to its memory through {@linkcode Route.bind}.
 *
 * @module
 */

import { type ArenaMemory, arenaOf } from "./arena_index.ts";
import { CPU } from "./device.ts";
import { arrayCodeOf, CODE_BYTES, NO_CODE } from "./array_code.ts";
import { type TypedArray, viewByteLength, viewByteOffset } from "./dtype.ts";
import { borrowList, IndexList, type NumberList, returnList } from "./number_list.ts";
import type { ResolvedOptions } from "./options.ts";
import { MAX_PACKED_TENSOR_BYTES, SequentialPacker } from "./pack_plan.ts";
import { type MirrorRun, MirrorWalk } from "./mirror_walk.ts";
import { type PackedChunk, type PackedStages, PackedWalk } from "./packed_walk.ts";
import type { Storage } from "./memory/storage.ts";
import { type LeafFields, leafFields, readLeaf } from "./leaf_fields.ts";
import {
  type TensorLayout,
  vectorLayout,
  type VectorLayouts,
  vectorLayouts,
} from "./tensor_layout.ts";
import { Tensor, tensorInternals } from "./tensor.ts";
import type { Leaf, LeafSink } from "./walk/leaf_sink.ts";

/** A leaf's fields, read at once (reused: no object per leaf). */
const FIELDS: LeafFields = leafFields();

/** The most leaves a new route's arrays are sized for ahead of its walk. */
const MAX_CAPACITY_HINT = 1 << 20;
let capacityHint = 0;

// The leaf and host-data arrays of routes whose lists were returned, lent
// to the next routes: read only while the copy is submitted, they were 16
// of a copy's ~110 bytes of allocation per leaf. (The outputs array is not
// lent: it is read until the copy ends.)
const spareArrays: unknown[][] = [];
const MAX_SPARE_ARRAYS = 8;

function borrowArray<T>(): T[] {
  return (spareArrays.pop() as T[] | undefined) ?? new Array(capacityHint);
}

// Returns `array`, cleared up to `used` (no input kept reachable); one much
// larger than the copies made now is left to the collector.
function returnArray(array: unknown[], used: number): void {
  // (A loop: `fill` gave the array a new backing store, 8 bytes an element.)
  const end = Math.min(used, array.length);
  for (let i = 0; i < end; i++) array[i] = undefined;
  if (spareArrays.length < MAX_SPARE_ARRAYS && array.length <= 4 * capacityHint + 64) {
    spareArrays.push(array);
  }
}

/** The leaves of one copy that need moving, with their output tensors. */
export class Route implements LeafSink {
  /** The target device index (-1: the CPU). */
  readonly target: number;
  /** The copy's resolved options. */
  readonly options: ResolvedOptions;
  /** Leaves found, including those that need no copy. */
  tensors = 0;
  /** Their payload bytes. */
  bytes = 0;
  /** Payload bytes of the leaves that move. */
  movedBytes = 0;
  /**
   * Leaves that move, by index (lent: cleared by
   * {@linkcode Route.releaseLists}, and longer than the leaves may be).
   */
  readonly leaves: Leaf[];
  /** Their outputs, by the same index. */
  readonly outputs: Tensor[];
  /**
   * The host bytes of CPU leaves as the walk read them, by the same index
   * (else undefined). Empty in a route to the CPU, whose moving leaves are
   * all on a device. Lent, as {@linkcode Route.leaves} is.
   */
  readonly hostData: (TypedArray | undefined)[];
  /**
   * The class code (see array_code.ts) of the bytes of each CPU→CUDA leaf,
   * by its position in {@linkcode Route.h2d} ({@linkcode NO_CODE} where the
   * walk read none): derived once, in the walk, for the dtype and for
   * packing.
   */
  readonly codes: NumberList = borrowList();
  /**
   * Outputs for leaves already on the target that hold a pooled storage of
   * their own (see {@linkcode Route.disposeShared}); usually none.
   */
  readonly #shared: Tensor[] = [];
  // Packers made after the walk (see adoptPacker).
  readonly #lastPackers: SequentialPacker[] = [];
  #moving = 0;
  #released = false;
  // Whether a walk packed the whole chunk: the route then stored no host data.
  #noHostData = false;
  // The pooled storages of the inputs, once per run of neighbours (see inputStorages).
  readonly #inputStorages: Storage[] = [];
  #lastInputStorage: Storage | undefined;
  // The device of the first CUDA→CPU (and CUDA→CUDA) leaf, and whether others differ.
  #d2hSource = CPU;
  #d2hMixed = false;
  #peerSource = CPU;
  #peerMixed = false;
  // The layouts of the outputs of TypedArray leaves on the target.
  readonly #layouts: VectorLayouts;
  /** Indices of CPU→CUDA leaves (implicit while they are all the leaves). */
  readonly h2d: IndexList = new IndexList();
  /** Indices of CPU→CUDA leaves that lie in a host arena (sent from where they are). */
  readonly fromArena: IndexList = new IndexList();
  /** The byte offset in its arena of each {@linkcode Route.fromArena} leaf, by the same position. */
  readonly arenaOffsets: NumberList = borrowList();
  /**
   * The arenas of {@linkcode Route.fromArena}: `arenas[j]` holds from
   * position `arenaStarts[j]` on (one entry per change; one in all for a
   * batch built in one arena).
   */
  readonly arenas: ArenaMemory[] = [];
  /** See {@linkcode Route.arenas}. */
  readonly arenaStarts: number[] = [];
  /** Indices of CUDA→other CUDA leaves. */
  readonly peer: number[] = [];
  /** Indices of CUDA→CPU leaves (implicit while they are all the leaves, as a copy back's are). */
  readonly d2h: IndexList = new IndexList();
  /**
   * The packing plan of the CPU→CUDA leaves, built during the walk when it
   * can be (the other directions plan at the transfer: transfer/chunks.ts).
   */
  readonly packer: SequentialPacker | undefined;
  /**
   * The storage of the CPU→CUDA leaves the walk packs (its block comes once
   * the walk is done: see `Storage.pending`): their outputs are created
   * bound to it, at their place in the chunk, so no pass binds them later.
   * Undefined until the first such leaf, and without `pendingStorage`.
   */
  chunkStorage: Storage | undefined;
  /**
   * The same for the leaves that lie in a host arena, bound at their
   * offset in it: right where they lie when the arena's leaves go in one
   * run from its start (a batch built in a fresh arena; else the transfer
   * binds them again).
   */
  arenaStorage: Storage | undefined;
  readonly #pendingStorage: ((target: number) => Storage) | undefined;
  /**
   * Packing during a compiled walk (see packed_walk.ts), where the copy
   * can: every leaf it takes is packed and bound when the walk is done.
   */
  readonly packedWalk: PackedWalk | MirrorWalk | undefined;
  /**
   * The pinned block holding every CPU→CUDA leaf, packed by the walk (see
   * {@linkcode Route.packedWalk}), with the pending storage of their
   * outputs; the transfer sends it with one DMA. Undefined otherwise.
   */
  packedChunk: PackedChunk | undefined;
  /**
   * The run of CUDA→CPU leaves a compiled walk took (see mirror_walk.ts);
   * the transfer sends it with one DMA. Undefined otherwise.
   */
  mirrorRun: MirrorRun | undefined;

  /**
   * A route to device index `target` (-1: the CPU). `pendingStorage`
   * makes the pending storage of the packed CPU→CUDA chunk (from the
   * transfer room, which owns the pools); without it, outputs are bound
   * after the walk. `stages`: the pinned blocks a compiled walk may pack
   * into (without them, leaves are packed after the walk).
   */
  constructor(
    target: number,
    options: ResolvedOptions,
    pendingStorage?: (target: number) => Storage,
    stages?: PackedStages,
  ) {
    this.target = target;
    this.#layouts = vectorLayouts(target);
    this.options = options;
    if (options.packCpuTensors && target !== CPU) this.packer = new SequentialPacker(options);
    if (target !== CPU) this.#pendingStorage = pendingStorage;
    // Sized like the last copy's (a training loop's batches are alike), so
    // that storing a leaf never grows the arrays; `end()` trims the outputs.
    this.leaves = borrowArray();
    this.outputs = new Array(capacityHint);
    this.hostData = target === CPU ? [] : borrowArray();
    if (
      stages !== undefined && pendingStorage !== undefined && this.packer?.valid &&
      options.usePinnedStaging
    ) {
      const limit = Math.min(MAX_PACKED_TENSOR_BYTES, options.maxPackedChunkBytes);
      this.packedWalk = new PackedWalk(
        target,
        { align: options.minPackedAlignmentBytes, limit, chunkLimit: options.maxPackedChunkBytes },
        stages,
        this,
        () => pendingStorage(target),
        () => this.#takeOverPacked(),
      );
    } else if (
      target === CPU && stages !== undefined && options.packCpuTensors &&
      options.usePinnedStaging
    ) {
      this.packedWalk = new MirrorWalk(
        {
          leafLimit: Math.min(MAX_PACKED_TENSOR_BYTES, options.maxPackedChunkBytes),
          chunkLimit: options.maxPackedChunkBytes,
        },
        this,
        stages.pinnedPending,
        () => this.#takeOverMirror(),
      );
    }
  }

  /**
   * The mirror walk turned off, or took a lone leaf: the leaves it took
   * are recorded as `add` and `#move` record a CUDA→CPU leaf (the transfer
   * binds their outputs again), as though the route had walked them.
   */
  #takeOverMirror(): void {
    const walk = this.packedWalk as MirrorWalk;
    walk.handOver();
    this.#endMirror(walk);
    for (let index = 0; index < walk.count; index++) this.d2h.push(index);
  }

  // What a mirror walk's leaves add to the route's counts, taken over or not.
  #endMirror(walk: MirrorWalk): void {
    const count = walk.count;
    this.tensors += count;
    this.bytes += walk.bytes;
    this.movedBytes += walk.bytes;
    this.#moving = count;
    this.#inputStorages.push(this.#lastInputStorage = walk.input!);
    this.#d2hSource = walk.source;
  }

  /**
   * The packed walk turned off (a leaf it cannot take): the leaves it took
   * are recorded as the route records a leaf, in the same order and at the
   * same offsets, as though the route had walked them itself.
   */
  #takeOverPacked(): void {
    const packed = this.packedWalk as PackedWalk;
    if (packed.arena !== undefined) return this.#takeOverArena(packed.arena, packed.handOver()!);
    const count = packed.count;
    this.chunkStorage = packed.handOver();
    this.tensors += count;
    this.bytes += packed.bytes;
    this.movedBytes += packed.bytes;
    this.#moving = count;
    const packer = this.packer!;
    for (let index = 0; index < count; index++) {
      const leaf = this.leaves[index];
      const data = leaf instanceof Tensor ? tensorInternals.packedData(leaf)! : leaf;
      this.hostData[index] = data;
      this.codes.push(
        leaf instanceof Tensor ? tensorInternals.code(leaf, data) : arrayCodeOf(data),
      );
      packer.place(this.h2d.length, viewByteLength(data));
      this.h2d.push(index);
    }
  }

  /**
   * The route takes over the arena tensors a walk took (packed_walk.ts,
   * `ArenaRun`), or ends a walk that took them all: the walk
   * filled the arena columns and bound the outputs as `#moveFromArena`
   * does; the rest of its recording is done here.
   */
  #takeOverArena(arena: ArenaMemory, storage: Storage): void {
    const packed = this.packedWalk as PackedWalk;
    const count = packed.count;
    this.arenaStorage = storage;
    this.tensors += count;
    this.bytes += packed.bytes;
    this.movedBytes += packed.bytes;
    this.#moving = count;
    this.arenas.push(arena);
    this.arenaStarts.push(0);
    // (`hostData` stays empty for them: only packing reads it.)
  }

  /** Ends the walk: the leaf and output arrays get their final length. */
  end(): void {
    const packed = this.packedWalk;
    if (packed instanceof MirrorWalk) {
      // (A lone leaf is handed over here.)
      const run = packed.finish();
      if (run !== undefined) {
        this.mirrorRun = run;
        this.#endMirror(packed);
      }
    } else if (packed !== undefined) {
      if (packed.on && packed.count > 0 && packed.arena === undefined) {
        this.tensors += packed.count;
        this.bytes += packed.bytes;
        this.movedBytes += packed.bytes;
        this.#moving = packed.count;
      }
      const taken = packed.finish();
      if (taken === undefined) {
        // (The packer's members: leaves too large to pack are in neither count.)
        if (this.packer?.valid) packed.notePayload(this.packer.end, this.packer.members.length);
      } else if ("arena" in taken) {
        this.#takeOverArena(taken.arena, taken.storage);
      } else {
        this.packedChunk = taken;
        this.#noHostData = true;
      }
    }
    const moving = this.#moving;
    if (this.outputs.length !== moving) this.outputs.length = moving;
    capacityHint = Math.min(moving, MAX_CAPACITY_HINT);
  }

  /** Returns the pooled index lists; the route's lists must not be used afterwards. */
  releaseLists(): void {
    // Once only: a list returned twice to the pool would be lent to two
    // routes at once (no caller does so; a cheap guard against one).
    if (this.#released) return;
    this.#released = true;
    // (A walk that threw may have stored leaves past #moving.)
    const used = Math.max(this.#moving, this.packedWalk?.count ?? 0);
    returnArray(this.leaves, used);
    if (this.target !== CPU) returnArray(this.hostData, this.#noHostData ? 0 : used);
    this.h2d.release();
    this.fromArena.release();
    this.d2h.release();
    returnList(this.arenaOffsets);
    returnList(this.codes);
    this.packer?.dispose();
    for (const packer of this.#lastPackers) packer.dispose();
    this.releasePackedBlock();
  }

  /**
   * Gives back the block of a packed walk that no transfer took (a copy
   * that failed before it was sent, or whose walk threw).
   */
  releasePackedBlock(): void {
    const packed = this.packedWalk;
    if (packed === undefined) return;
    const chunk = this.packedChunk;
    this.packedChunk = undefined;
    if (chunk !== undefined) (packed as PackedWalk).release(chunk.block);
    else packed.abandon();
  }

  /**
   * Gives the route a packer made after its walk (transfer/chunks.ts), whose
   * lists are then returned with the route's; returns it.
   */
  adoptPacker(packer: SequentialPacker): SequentialPacker {
    this.#lastPackers.push(packer);
    return packer;
  }

  /**
   * Records a leaf; returns what stands in its place in the result.
   * `code`: a TypedArray leaf's class code, as the walk read it
   * ({@linkcode NO_CODE} for a `Tensor`).
   */
  add(leaf: Leaf, data: TypedArray | undefined, code: number): unknown {
    // A leaf the packed walk was not offered (one the generic walk met):
    // from here on the route records every leaf.
    if (this.packedWalk?.on) this.packedWalk.stop();
    if (code !== NO_CODE) return this.#addArray(leaf as TypedArray, code);
    this.tensors++;
    const fields = FIELDS;
    // A tensor (readLeaf's first branch: calling tensorInternals.read here
    // instead measured the arena copy 1.10-1.12x slower, V8 then no longer
    // inlining the outputs' creation into #moveFromArena).
    readLeaf(leaf, fields);
    const source = fields.device;
    this.bytes += fields.byteLength;
    if (source === this.target) {
      // Not copied, yet a tensor of its own: disposing the result must
      // not dispose the caller's input (nor the input the result).
      const shared = tensorInternals.share(leaf as Tensor);
      if (data === undefined) this.#shared.push(shared);
      return shared;
    }
    // The output's layout: the input's on the target (made once per layout).
    const layout = fields.layout!.on(this.target);
    if (data === undefined) {
      // In pooled memory (CUDA or pinned): held while the copy reads it.
      const storage = fields.storage;
      if (storage !== undefined && storage !== this.#lastInputStorage) {
        this.#inputStorages.push(this.#lastInputStorage = storage);
      }
      return this.#move(leaf, source, undefined, layout, NO_CODE);
    }
    // (An arena leaf is sent from where it lies: its class is never needed.)
    const arena = fields.arena;
    if (arena) return this.#moveFromArena(leaf, data, arena, layout);
    // A tensor's class is its data's, kept by the tensor once read.
    return this.#move(leaf, source, data, layout, fields.code);
  }

  /**
   * `add` for a TypedArray leaf of class `code`: read as the CPU tensor
   * that would wrap it (as `readLeaf` reads it, without reading its class
   * again or filling the fields).
   */
  #addArray(leaf: TypedArray, code: number): unknown {
    this.tensors++;
    // The engine's size, not the leaf's `byteLength` property (see viewByteLength).
    const byteLength = viewByteLength(leaf);
    this.bytes += byteLength;
    const layout = vectorLayout(this.#layouts, code, byteLength / CODE_BYTES[code], this.target);
    // As in the reference package: a CPU leaf to the CPU is not copied.
    if (this.target === CPU) return tensorInternals.create(layout, leaf);
    const arena = arenaOf(leaf);
    if (arena) return this.#moveFromArena(leaf, leaf, arena, layout);
    return this.#move(leaf, CPU, leaf, layout, code);
  }

  /**
   * Disposes the outputs that share an input's pooled storage: for a copy
   * that failed (in the walk, or later) and whose result nobody will get.
   */
  disposeShared(): void {
    for (const output of this.#shared) output.dispose();
    this.#shared.length = 0;
  }

  /** Binds output `index` to `offset` in `storage`, taking over one of its holds. */
  bind(index: number, storage: Storage, offset: number): void {
    tensorInternals.bind(this.outputs[index], storage, offset);
  }

  /**
   * Moves the outputs at `indices` from their (pinned) storage into ordinary
   * memory they own: CUDA→CPU results without pinned staging. An output
   * disposed before the copy completed stays as it is.
   */
  moveOutputsToOrdinaryMemory(indices: ArrayLike<number>): void {
    for (let k = 0; k < indices.length; k++) {
      const output = this.outputs[indices[k]];
      if (output.disposed) continue;
      tensorInternals.rebind(output, tensorInternals.bytes(output).slice());
    }
  }

  /** The bytes of CPU leaf `index` (the leaf itself, or a tensor's view). */
  hostBytes(index: number): TypedArray {
    return this.hostData[index] ?? tensorInternals.bytes(this.leaves[index] as Tensor);
  }

  /** Whether leaf `index` is a tensor already in pinned host memory. */
  isPinned(index: number): boolean {
    const leaf = this.leaves[index];
    return leaf instanceof Tensor && leaf.pinned;
  }

  /** The address of leaf `index` (a tensor in pooled memory: device or pinned). */
  sourceAddress(index: number): number {
    return tensorInternals.address(this.leaves[index] as Tensor);
  }

  /** The pooled storage leaf `index` lies in (a tensor in pooled memory: device or pinned). */
  sourceStorage(index: number): Storage | undefined {
    return tensorInternals.storage(this.leaves[index] as Tensor);
  }

  /**
   * Records where the bytes of every leaf in pooled memory lie (its address
   * and storage; a pinned leaf's view too), so that the transfers no longer ask the
   * tensors: for a copy about to wait for memory, while user code may
   * dispose them (their storages are held, their memory stays: Note
   * [Copies that wait for memory] in transfer/admission.ts).
   */
  captureSources(): void {
    const addresses: number[] = [];
    const storages: Storage[] = [];
    const pinned: boolean[] = [];
    for (let i = 0; i < this.#moving; i++) {
      const leaf = this.leaves[i];
      if (!(leaf instanceof Tensor)) continue;
      const storage = tensorInternals.storage(leaf);
      if (storage === undefined) continue;
      addresses[i] = tensorInternals.address(leaf);
      storages[i] = storage;
      pinned[i] = leaf.pinned;
      if (leaf.pinned) this.hostData[i] = tensorInternals.bytes(leaf);
    }
    // This route's own methods: the routes of copies that never wait keep
    // the plain ones (a check in them cost GPU→CPU copies 2–4 %, per leaf).
    this.sourceAddress = (index) =>
      addresses[index] ?? tensorInternals.address(this.leaves[index] as Tensor);
    this.sourceStorage = (index) =>
      storages[index] ?? tensorInternals.storage(this.leaves[index] as Tensor);
    this.isPinned = (index) => pinned[index] ?? false;
  }

  /**
   * The pooled storages the input leaves live in (to hold while the copy
   * runs), each once per run of neighbours that share it, as the walk found
   * them: the outputs of a packed copy share their chunk's storage, and one
   * hold per run keeps it as well as one per leaf (528 retains and releases
   * fewer per reference batch copied back).
   */
  inputStorages(): readonly Storage[] {
    return this.#inputStorages;
  }

  /** The CUDA→CPU leaves grouped by their device, in order. */
  d2hBySource(): Map<number, ArrayLike<number>> {
    if (this.d2h.length === 0) return new Map();
    const d2h = this.d2h.view();
    return this.#d2hMixed ? this.#bySource(d2h) : new Map([[this.#d2hSource, d2h]]);
  }

  /** The CUDA→other CUDA leaves grouped by their device, in order. */
  peerBySource(): Map<number, number[]> {
    if (this.peer.length === 0) return new Map();
    return this.#peerMixed ? this.#bySource(this.peer) : new Map([[this.#peerSource, this.peer]]);
  }

  /** The leaves at `indices` (CUDA tensors) grouped by their device, in order. */
  #bySource(indices: ArrayLike<number>): Map<number, number[]> {
    const groups = new Map<number, number[]>();
    // Neighbours mostly share a device: look its list up only on a change.
    let lastSource = NaN;
    let list: number[] = [];
    for (let k = 0; k < indices.length; k++) {
      const i = indices[k];
      const source = tensorInternals.device(this.leaves[i] as Tensor);
      if (source !== lastSource) {
        lastSource = source;
        let found = groups.get(source);
        if (!found) groups.set(source, found = []);
        list = found;
      }
      list.push(i);
    }
    return groups;
  }

  #moveFromArena(leaf: Leaf, data: TypedArray, arena: ArenaMemory, layout: TensorLayout): Tensor {
    const index = this.#moving++;
    const offset = viewByteOffset(data);
    const bytes = layout.byteLength;
    let output: Tensor;
    if (this.#pendingStorage !== undefined) {
      // Created where it will lie if the batch goes in one run from the
      // arena's start (a batch built in a fresh arena): see `arenaStorage`.
      const storage = this.arenaStorage ??= this.#pendingStorage(this.target);
      output = tensorInternals.createBound(layout, storage, offset);
    } else {
      output = tensorInternals.create(layout);
    }
    this.movedBytes += bytes;
    this.leaves[index] = leaf;
    this.outputs[index] = output;
    this.hostData[index] = data;
    if (arena !== this.arenas[this.arenas.length - 1]) {
      this.arenas.push(arena);
      this.arenaStarts.push(this.fromArena.length);
    }
    this.fromArena.push(index);
    this.arenaOffsets.push(offset);
    return output;
  }

  // The first lines repeat #moveFromArena's: a shared helper measured a
  // little slower on this per-leaf path.
  #move(
    leaf: Leaf,
    source: number,
    data: TypedArray | undefined,
    layout: TensorLayout,
    code: number,
  ): Tensor {
    const index = this.#moving++;
    const bytes = layout.byteLength;
    this.movedBytes += bytes;
    this.leaves[index] = leaf;
    if (data !== undefined) this.hostData[index] = data;
    if (source === CPU && this.packer !== undefined && this.#pendingStorage !== undefined) {
      // CPU→CUDA, packed: the output is created where it will lie.
      const offset = this.packer.place(this.h2d.length, bytes);
      this.h2d.push(index);
      this.codes.push(code);
      const output = offset < 0 ? tensorInternals.create(layout) : tensorInternals.createBound(
        layout,
        this.chunkStorage ??= this.#pendingStorage(this.target),
        offset,
      );
      this.outputs[index] = output;
      return output;
    }
    const output = tensorInternals.create(layout);
    this.outputs[index] = output;
    if (this.target === CPU) {
      const d2h = this.d2h;
      if (d2h.length === 0) this.#d2hSource = source;
      else if (source !== this.#d2hSource) this.#d2hMixed = true;
      d2h.push(index);
    } else if (source === CPU) {
      this.packer?.add(this.h2d.length, bytes);
      this.h2d.push(index);
      this.codes.push(code);
    } else {
      if (this.peer.length === 0) this.#peerSource = source;
      else if (source !== this.#peerSource) this.#peerMixed = true;
      this.peer.push(index);
    }
    return output;
  }
}
