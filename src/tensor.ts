/**
 * `Tensor`: a dtype, a shape and bytes on one device.
 *
 * A tensor either wraps host data the caller owns (a TypedArray; no copy)
 * or holds part of a pooled block (pinned host or device memory) through a
 * {@linkcode Storage}. Many tensors of a packed chunk share one storage.
 *
 * @module
 */

import { pointerOf, pointerOfView } from "../ffi/native.ts";
import { type ArenaMemory, arenaOf } from "./arena_index.ts";
import { arrayCodeOf, NO_CODE } from "./array_code.ts";
import { CPU, type DeviceIndex } from "./device.ts";
import {
  arrayClassOf,
  builtinClassOf,
  type DType,
  isDetached,
  type TypedArray,
  typedArrayNameOf,
  viewBuffer,
  viewByteLength,
  viewByteOffset,
} from "./dtype.ts";
import type { After } from "./gpu/after.ts";
import { afterOption, type DisposeOptions, OrderedRelease } from "./gpu/ordered_release.ts";
import { pinnedBuffer } from "./memory/pinned_memory.ts";
import type { Storage } from "./memory/storage.ts";
import { checkFromArgs } from "./tensor_from_args.ts";
import { cpuLayout, type TensorLayout } from "./tensor_layout.ts";

/**
 * Whether two shapes have the same dimensions.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { sameDims } from "./tensor.ts";
 * assert.ok(sameDims([2, 3], [2, 3]) && !sameDims([2, 3], [3, 2]));
 * ```
 */
export function sameDims(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// The storage a pinned tensor's `toTypedArray()` view keeps reachable (see there).
const VIEW_HOLDS = Symbol("mtc.viewHolds");

// A tensor's class code before it is first read (see `#slot`).
const UNKNOWN_CODE = -2;

// A disposed tensor's slot (an offset or a class code is otherwise >= 0).
const DISPOSED = -1;

/**
 * Library-internal access to a tensor's private state (not exported by
 * `mod.ts`): the one interface through which the library creates, binds and
 * reads tensors. Callers use {@linkcode tensorInternals}'s functions
 * directly (one call per use, no forwarding layer).
 */
export interface TensorInternals {
  /**
   * Creates a tensor of `layout` (see tensor_layout.ts: outputs share
   * theirs) over `data`, host data it wraps, or without it, unbound: a
   * tensor for a device copy is bound to its memory with `bind` once that
   * memory is planned.
   */
  create(layout: TensorLayout, data?: TypedArray): Tensor;
  /**
   * Creates a tensor of `layout` already bound to `offset` in `storage`
   * (whose hold it takes over): an output placed by the walk.
   */
  createBound(layout: TensorLayout, storage: Storage, offset: number): Tensor;
  /** Points a tensor at `offset` in `storage`, whose hold it takes over. */
  bind(tensor: Tensor, storage: Storage, offset: number): void;
  /** Moves a tensor to host data it owns, releasing its storage. */
  rebind(tensor: Tensor, data: TypedArray): void;
  /**
   * A new tensor over the same memory as `tensor` (same dtype, shape and
   * device), with its own hold on it: a hold on the pooled storage, or the
   * same host data. Disposing either leaves the other valid; the memory
   * goes back once both are disposed. `tensor` must not be disposed.
   */
  share(tensor: Tensor): Tensor;
  /**
   * `toTypedArray()` for the library's own use while it holds the tensor
   * (the view does not keep the memory reachable by itself).
   */
  bytes(tensor: Tensor): TypedArray;
  /** A tensor's layout (its dtype, shape, byte length and device, shared). */
  layout(tensor: Tensor): TensorLayout;
  /** The device index of a tensor. */
  device(tensor: Tensor): DeviceIndex;
  /** The pooled storage behind a tensor, if any. */
  storage(tensor: Tensor): Storage | undefined;
  /** The address of a storage-backed tensor's first byte. */
  address(tensor: Tensor): number;
  /**
   * The host data a CPU tensor wraps, if it wraps any. A length-tracking
   * view whose buffer grew comes back as a fixed-length view of the
   * tensor's bytes; one whose buffer shrank or was detached comes back as
   * it is (its `byteLength` then differs from the tensor's, which callers
   * check).
   */
  data(tensor: Tensor): TypedArray | undefined;
  /**
   * The host data of a tensor leaf as the walk reads it: as `data`, or
   * {@linkcode REJECTED_LEAF} for a disposed tensor or one whose data no
   * longer has its bytes (one call per leaf).
   */
  walkData(tensor: Tensor): TypedArray | undefined | typeof REJECTED_LEAF;
  /**
   * The host data of a live CPU tensor of `dtype`, `byteLength` and
   * `shape` that still has its bytes (as `walkData` reads it); undefined
   * for any other tensor (another description, a disposed or pinned one, a
   * detached view). One call for a copy into an earlier result, which
   * compares every leaf with the tensor it replaces.
   */
  hostView(
    tensor: Tensor,
    dtype: DType,
    byteLength: number,
    shape: readonly number[],
  ): TypedArray | undefined;
  /** Reads a tensor's description into `into` (one call, where a leaf needs several fields). */
  read(tensor: Tensor, into: TensorFields): void;
  /**
   * The host data of a live CPU tensor in ordinary memory (no pinned
   * storage, no host arena) that still has its bytes, as `walkData` reads
   * it; undefined for any other tensor. For packing during a walk.
   */
  packedData(tensor: Tensor): TypedArray | undefined;
  /** The class code of `data`, the host data of `tensor` (kept by the tensor once found). */
  code(tensor: Tensor, data: TypedArray): number;
  /**
   * A new tensor of `tensor`'s dtype, shape and size on device `device`,
   * bound to `storage` at `offset` (taking over one of its holds).
   */
  packedOutput(tensor: Tensor, device: DeviceIndex, storage: Storage, offset: number): Tensor;
  /** The host arena a CPU tensor's data lies in, if any (found when the tensor was made). */
  arena(tensor: Tensor): ArenaMemory | undefined;
  /**
   * Starts a disposal of many tensors (`disposeAll` by a compiled plan):
   * each `disposeInBatch` marks its tensor disposed at once, and the holds
   * its storage loses are counted and dropped together, one call per run
   * of tensors in one storage (a copy's 528 outputs lie in one) rather
   * than one per tensor. `endDisposal` drops what is still counted; call
   * it in a `finally`.
   */
  beginDisposal(): DisposalBatch;
  /** `tensor.dispose()` (no `after`), its storage's hold counted in `batch`. */
  disposeInBatch(tensor: Tensor, batch: DisposalBatch): void;
  /** Drops the holds `batch` still counts; the batch may be reused after. */
  endDisposal(batch: DisposalBatch): void;
}

/** The holds of one storage that a disposal has counted and not yet dropped. */
export interface DisposalBatch {
  storage: Storage | undefined;
  count: number;
}

// Disposals of tensors that wrap host data (see `hostTensorDisposals`).
let hostDisposals = 0;

/**
 * How many tensors that wrap host data were disposed in this isolate so
 * far: while it stands still, every such tensor seen alive is alive still
 * (a copy into a result skips checking the leaves it read last time:
 * transfer/into/known.ts).
 */
export function hostTensorDisposals(): number {
  return hostDisposals;
}

// The batch of the next disposal (none while one is in use: a getter may
// start a disposal during another).
let freeBatch: DisposalBatch | undefined = { storage: undefined, count: 0 };

/**
 * Filled in by `Tensor`'s static block, so that its functions reach the
 * private fields (library-internal: not exported by mod.ts).
 */
export const tensorInternals = {} as TensorInternals;

/** What `tensorInternals.walkData` returns for a tensor the walk must refuse. */
export const REJECTED_LEAF: unique symbol = Symbol("rejected leaf");

/** A tensor's description, read at once (`tensorInternals.read`). */
export interface TensorFields {
  /** The tensor's layout (undefined for a TypedArray leaf, see `readLeaf`). */
  layout: TensorLayout | undefined;
  device: DeviceIndex;
  dtype: DType;
  shape: readonly number[];
  byteLength: number;
  arena: ArenaMemory | undefined;
  storage: Storage | undefined;
  /**
   * The class code (array_code.ts) of the host data (of a TypedArray leaf,
   * or the data a CPU tensor wraps); {@linkcode NO_CODE} for a tensor that
   * wraps none and for a view that is no built-in TypedArray.
   */
  code: number;
}

/**
 * A {@linkcode TensorFields} to read tensors into, reused by its owner (no
 * object per leaf).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensorFields } from "./tensor.ts";
 * assert.equal(tensorFields().storage, undefined);
 * ```
 */
export function tensorFields(): TensorFields {
  return {
    layout: undefined,
    device: CPU,
    dtype: "uint8",
    shape: [],
    byteLength: 0,
    arena: undefined,
    storage: undefined,
    code: NO_CODE,
  };
}

// The constructor's key: only this module's factories hold it.
const CONSTRUCT = Symbol("Tensor");

/**
 * A tensor: `dtype`, `shape` and bytes on the CPU or a CUDA device.
 *
 * @example Wrapping host data without copying
 * ```ts
 * import { Tensor } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const data = new Float32Array(8);
 * const boxes = Tensor.from(data, [2, 4]);
 * assert.equal(boxes.device, "cpu");
 * assert.equal(boxes.numel, 8);
 * assert.equal(boxes.toTypedArray().buffer, data.buffer); // the same memory
 * ```
 */
export class Tensor {
  // Private fields behind getters: a tensor's description cannot be changed
  // from outside (a writable `dtype` would reinterpret its bytes).
  // The description (dtype, shape, byte length, device) in one shared
  // object: every output of every copy pays each field in allocation and GC
  // (8 fields were 88 bytes a tensor; 4 are 56). The private helpers are
  // static for the same reason: an instance private method gives every
  // instance a brand slot (8 bytes more).
  readonly #layout: TensorLayout;
  #data: TypedArray | undefined;
  // Where the bytes lie beyond a view: the pooled storage of a tensor that
  // wraps no data, else the host arena the wrapped data lies in (found
  // once here rather than per copy: a lookup on the data's buffer for every
  // leaf of every copy).
  #memory: Storage | ArenaMemory | undefined;
  // DISPOSED once disposed; else, for a tensor that wraps no data, the byte
  // offset in its storage, and for one that wraps data, the class code
  // (array_code.ts) of that data, UNKNOWN_CODE until the first copy that
  // packs it reads it (a call into the TypedArray's internals per leaf of
  // every copy cost ~6 % of a reference batch copy on an H100 host). One
  // field for both: a tensor needs only one of them.
  #slot: number;

  /** `data`: the host data wrapped; without it, a tensor to be bound. */
  private constructor(key: symbol, layout: TensorLayout, data?: TypedArray) {
    // Private only to TypeScript: at run time a forged tensor would have
    // neither data nor storage, yet pass every check of a copy.
    if (key !== CONSTRUCT) {
      throw new TypeError(
        "Cannot construct a Tensor directly: use Tensor.from(data, shape?, dtype?)",
      );
    }
    this.#layout = layout;
    if (data === undefined) {
      this.#slot = 0;
    } else {
      this.#data = data;
      this.#memory = arenaOf(data);
      this.#slot = UNKNOWN_CODE;
    }
  }

  /** Element type. */
  get dtype(): DType {
    return this.#layout.dtype;
  }

  /**
   * Dimensions, a frozen array (tensors may share it); their product is
   * {@linkcode Tensor.numel}.
   */
  get shape(): readonly number[] {
    return this.#layout.shape;
  }

  /** `"cpu"` or `"cuda:N"`. */
  get device(): string {
    return this.#layout.deviceName;
  }

  /** Payload size in bytes. */
  get byteLength(): number {
    return this.#layout.byteLength;
  }

  static {
    tensorInternals.create = (layout, data) => new Tensor(CONSTRUCT, layout, data);
    tensorInternals.createBound = (layout, storage, offset) => {
      const tensor = new Tensor(CONSTRUCT, layout);
      tensor.#memory = storage;
      tensor.#slot = offset;
      return tensor;
    };
    tensorInternals.bind = (tensor, storage, offset) => {
      tensor.#memory = storage;
      tensor.#slot = offset;
    };
    tensorInternals.rebind = (tensor, data) => {
      Tensor.#storageOf(tensor)?.release();
      tensor.#data = data;
      tensor.#memory = arenaOf(data);
      tensor.#slot = UNKNOWN_CODE;
    };
    tensorInternals.share = (tensor) => {
      const shared = new Tensor(CONSTRUCT, tensor.#layout);
      const storage = Tensor.#storageOf(tensor);
      if (storage !== undefined) {
        // Its own hold: either tensor may be disposed first.
        storage.retain();
        shared.#memory = storage;
        shared.#slot = tensor.#slot;
      } else if (tensor.#data !== undefined) {
        // Host data: the view keeps the bytes alive, whoever disposes.
        shared.#data = tensor.#data;
        shared.#memory = tensor.#memory;
        shared.#slot = tensor.#slot;
      }
      return shared;
    };
    tensorInternals.layout = (tensor) => tensor.#layout;
    tensorInternals.device = (tensor) => tensor.#layout.device;
    tensorInternals.storage = (tensor) => Tensor.#storageOf(tensor);
    tensorInternals.bytes = (tensor) => Tensor.#view(tensor, false);
    tensorInternals.address = (tensor) => Tensor.#storageOf(tensor)!.address + tensor.#slot;
    tensorInternals.data = (tensor) => {
      const data = tensor.#data;
      // The walk reads this for every CPU tensor leaf: one comparison on
      // the path of a view that still has the tensor's length.
      return data === undefined || viewByteLength(data) === tensor.#layout.byteLength
        ? data
        : Tensor.#fixLength(tensor, data);
    };
    tensorInternals.arena = (tensor) => Tensor.#arenaOf(tensor);
    tensorInternals.beginDisposal = () => {
      const batch = freeBatch ?? { storage: undefined, count: 0 };
      freeBatch = undefined;
      return batch;
    };
    tensorInternals.endDisposal = (batch) => {
      const storage = batch.storage;
      if (storage !== undefined) {
        batch.storage = undefined;
        storage.releaseHolds(batch.count);
      }
      freeBatch = batch;
    };
    tensorInternals.disposeInBatch = (tensor, batch) => {
      if (tensor.#slot === DISPOSED) return;
      const memory = Tensor.#markDisposed(tensor);
      if (memory === undefined) return;
      if (memory === batch.storage) {
        batch.count++;
      } else {
        const previous = batch.storage;
        const count = batch.count;
        // The batch is the new storage's before the previous one's holds go
        // (a release that throws, a failed free, leaves it consistent).
        batch.storage = memory as Storage;
        batch.count = 1;
        (memory as Storage).disposing();
        if (previous !== undefined) previous.releaseHolds(count);
      }
    };
    tensorInternals.walkData = (tensor) => {
      if (tensor.#slot === DISPOSED) return REJECTED_LEAF;
      const data = tensor.#data;
      const byteLength = tensor.#layout.byteLength;
      if (data === undefined || viewByteLength(data) === byteLength) return data;
      const fixed = Tensor.#fixLength(tensor, data);
      return viewByteLength(fixed) === byteLength ? fixed : REJECTED_LEAF;
    };
    tensorInternals.packedData = (tensor) => {
      // (A disposed tensor has no data.)
      const data = tensor.#data;
      if (data === undefined || tensor.#memory !== undefined) return undefined;
      const byteLength = tensor.#layout.byteLength;
      if (viewByteLength(data) === byteLength) return data;
      const fixed = Tensor.#fixLength(tensor, data);
      return viewByteLength(fixed) === byteLength ? fixed : undefined;
    };
    tensorInternals.code = (tensor, data) => {
      const code = tensor.#slot;
      return code === UNKNOWN_CODE ? tensor.#slot = arrayCodeOf(data) : code;
    };
    tensorInternals.packedOutput = (tensor, device, storage, offset) => {
      const output = new Tensor(CONSTRUCT, tensor.#layout.on(device));
      output.#memory = storage;
      output.#slot = offset;
      return output;
    };
    tensorInternals.hostView = (tensor, dtype, byteLength, shape) => {
      const layout = tensor.#layout;
      if (
        layout.device !== CPU || layout.dtype !== dtype ||
        layout.byteLength !== byteLength || !sameDims(layout.shape, shape)
      ) {
        return undefined;
      }
      // Undefined once disposed, and for a pinned tensor (its storage).
      const data = tensor.#data;
      if (data === undefined || viewByteLength(data) === byteLength) return data;
      const fixed = Tensor.#fixLength(tensor, data);
      return viewByteLength(fixed) === byteLength ? fixed : undefined;
    };
    tensorInternals.read = (tensor, into) => {
      const layout = tensor.#layout;
      into.layout = layout;
      into.device = layout.device;
      into.dtype = layout.dtype;
      into.shape = layout.shape;
      into.byteLength = layout.byteLength;
      const data = tensor.#data;
      if (data === undefined) {
        into.arena = undefined;
        into.storage = tensor.#memory as Storage | undefined;
        into.code = NO_CODE;
      } else {
        into.arena = tensor.#memory as ArenaMemory | undefined;
        into.storage = undefined;
        let code = tensor.#slot;
        if (code === UNKNOWN_CODE) code = tensor.#slot = arrayCodeOf(data);
        into.code = code;
      }
    };
  }

  /**
   * Wraps host data as a CPU tensor, without copying.
   *
   * @param data the elements; a view of part of a larger buffer is valid
   * @param shape dimensions (default `[data.length]`)
   * @param dtype element type (default from the array class); `"bool"` takes
   * a `Uint8Array`, `"bfloat16"` and `"float16"` a `Uint16Array` or
   * `Float16Array`
   * @returns a CPU tensor over `data`'s memory
   * @throws {TypeError} for data that is no supported TypedArray, an unknown
   * dtype, a dtype that does not fit the array class, or a detached buffer
   * @throws {RangeError} when the product of `shape` is not `data.length`
   *
   * @example A 3×4 projection matrix
   * ```ts
   * import { Tensor } from "@mtc/core";
   * import assert from "node:assert/strict";
   * const projection = Tensor.from(new Float32Array(12), [3, 4]);
   * assert.deepEqual(projection.shape, [3, 4]);
   * assert.equal(projection.byteLength, 48);
   * assert.throws(() => Tensor.from(new Float32Array(12), [5, 4]), RangeError);
   * ```
   */
  static from(data: TypedArray, shape?: readonly number[], dtype?: DType): Tensor {
    const { type, dims, view } = checkFromArgs(data, shape, dtype);
    return new Tensor(CONSTRUCT, cpuLayout(type, dims, viewByteLength(view)), view);
  }

  /** Number of elements. */
  get numel(): number {
    return this.#layout.numel;
  }

  /** Whether the tensor's host memory is page-locked (pinned). */
  get pinned(): boolean {
    return this.#layout.device === CPU && Tensor.#storageOf(this) !== undefined;
  }

  /** Whether {@linkcode Tensor.dispose} was called. */
  get disposed(): boolean {
    return this.#slot === DISPOSED;
  }

  /** Address of the first byte (host or device); null for an empty tensor. */
  get ptr(): Deno.PointerValue {
    Tensor.#assertLive(this);
    const storage = Tensor.#storageOf(this);
    if (storage) return pointerOf(storage.address + this.#slot);
    return pointerOfView(Tensor.#wrapped(this)!);
  }

  /**
   * The bytes as a TypedArray of the dtype's class (`Uint8Array` for bool,
   * `Uint16Array` for bfloat16). No copy: it views the tensor's memory.
   *
   * @throws {TypeError} on a CUDA tensor
   * @throws {Error} on a disposed tensor
   */
  toTypedArray(): TypedArray {
    return Tensor.#view(this, true);
  }

  /**
   * `toTypedArray()`; `held`: the view of pooled memory keeps the storage
   * reachable (for views that leave the library; its own, short-lived ones
   * skip the cost of the property).
   */
  static #view(tensor: Tensor, held: boolean): TypedArray {
    Tensor.#assertLive(tensor);
    if (tensor.#layout.device !== CPU) {
      throw new TypeError(
        `Cannot read a tensor on ${tensor.device} as a TypedArray: copy it to "cpu" first`,
      );
    }
    const cls = arrayClassOf(tensor.#layout.dtype);
    const data = Tensor.#wrapped(tensor);
    // The wrapped array itself only when it is exactly the dtype's built-in class.
    const exact = data && Object.getPrototypeOf(data) === cls.prototype;
    if (exact && typedArrayNameOf(data) === cls.name) return data;
    if (data) return new cls(data.buffer, data.byteOffset, tensor.numel);
    const storage = Tensor.#storageOf(tensor)!;
    const view = new cls(pinnedBuffer(storage.block), tensor.#slot, tensor.numel);
    // The view keeps the storage reachable: `(await startCopy(t, "cpu").get())
    // .toTypedArray()` drops the tensor at once, and the storage's finalizer
    // gave the block back to the pool while the array was in use (the next
    // copy to the CPU landed in it).
    if (held) Object.defineProperty(view, VIEW_HOLDS, { value: storage });
    return view;
  }

  /**
   * Releases this tensor's hold on pooled pinned or device memory. Calling
   * it again does nothing. A disposed tensor cannot be read or copied.
   * Other tensors over the same memory (a copy's result for a tensor that
   * was already on its target, and that input) keep their own holds.
   *
   * With `after` (a launch, a copy handle, or a stream), the memory is
   * reused only after that work, ordered on the GPU: the CPU does not wait.
   * Use it when your own code still reads the tensor through `ptr` on a
   * stream of yours; without it the next copy may overwrite the memory while
   * that code reads it. Host memory (pinned, or a `hostArena`'s) is held
   * until the CPU sees that work complete (the arena's `reset()` throws
   * until then).
   *
   * @param options `after`: work that still reads the tensor
   * @throws {TypeError} for an `after` that is no copy handle, work or stream
   *
   * @example Dispose after your own work on a stream, without waiting
   * ```ts
   * import assert from "node:assert/strict";
   * import { createStream, deviceCount, startCopy } from "@mtc/core";
   * if (deviceCount() > 0) {
   *   using stream = createStream("cuda:0");
   *   const [x] = await startCopy([new Float32Array(8)], "cuda:0").get();
   *   // ... your FFI code queues kernels that read x.ptr on stream.handle ...
   *   x.dispose({ after: stream });
   *   assert.ok(x.disposed);
   * }
   * ```
   */
  dispose(options?: DisposeOptions): void {
    const after = afterOption(options);
    if (this.#slot === DISPOSED) return;
    const storage = Tensor.#storageOf(this);
    if (after !== undefined) {
      const release = after instanceof OrderedRelease
        ? after
        : new OrderedRelease(after as After, "option after");
      release.order(storage, this.#layout.device, Tensor.#arenaOf(this));
    }
    Tensor.#markDisposed(this);
    storage?.releaseDisposed();
  }

  /** Same as {@linkcode Tensor.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Shows dtype, shape and device in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `Tensor(${this.dtype}, [${this.shape.join(", ")}], ${this.device}${
      this.#slot === DISPOSED ? ", disposed" : ""
    })`;
  }

  /** The pooled storage behind this tensor: its memory where it wraps no data. */
  // Marks a live tensor disposed and forgets its memory; returns the
  // storage whose hold it had (the caller drops it), if any.
  static #markDisposed(tensor: Tensor): Storage | undefined {
    const storage = Tensor.#storageOf(tensor);
    tensor.#slot = DISPOSED;
    tensor.#memory = undefined;
    if (tensor.#data !== undefined) {
      hostDisposals++;
      tensor.#data = undefined;
    }
    return storage;
  }

  static #storageOf(tensor: Tensor): Storage | undefined {
    return tensor.#data === undefined ? tensor.#memory as Storage | undefined : undefined;
  }

  /** The host arena the wrapped data lies in: its memory where it wraps data. */
  static #arenaOf(tensor: Tensor): ArenaMemory | undefined {
    return tensor.#data === undefined ? undefined : tensor.#memory as ArenaMemory | undefined;
  }

  /** The wrapped host data, checked to still hold the tensor's bytes. */
  static #wrapped(tensor: Tensor): TypedArray | undefined {
    let data = tensor.#data;
    if (data === undefined || viewByteLength(data) === tensor.#layout.byteLength) return data;
    data = Tensor.#fixLength(tensor, data);
    if (viewByteLength(data) === tensor.#layout.byteLength) return data;
    const what = isDetached(data) ? "detached" : "shrunk below the tensor's bytes";
    throw new TypeError(
      `Cannot use a tensor whose buffer was ${what} after it was wrapped (${tensor.#layout.byteLength} bytes expected, ${
        viewByteLength(data)
      } left): wrap the data again`,
    );
  }

  /**
   * The wrapped data of a length that differs from the tensor's. A view
   * that tracks the length of a resizable buffer (made without a length)
   * and whose buffer grew is replaced by a fixed-length view of the
   * tensor's bytes: the tensor keeps the shape it was made with, and stays
   * valid while its bytes exist. (`Tensor.from` wraps such a view with a
   * fixed length at once; a copy to the CPU wraps its leaves as they are,
   * since finding out would cost every leaf a read of its buffer.) Any
   * other difference (a buffer detached or shrunk below the tensor's
   * bytes) is returned as is, for the caller to refuse.
   */
  static #fixLength(tensor: Tensor, data: TypedArray): TypedArray {
    if (viewByteLength(data) < tensor.#layout.byteLength) return data;
    const cls = builtinClassOf(data);
    const fixed = new cls(
      viewBuffer(data),
      viewByteOffset(data),
      tensor.#layout.byteLength / cls.BYTES_PER_ELEMENT,
    );
    tensor.#data = fixed;
    return fixed;
  }

  static #assertLive(tensor: Tensor): void {
    if (tensor.#slot !== DISPOSED) return;
    const what = `${tensor.dtype} [${tensor.shape.join(", ")}] on ${tensor.device}`;
    throw new Error(`Cannot use a disposed tensor (${what}): copy or wrap the data again`);
  }
}
