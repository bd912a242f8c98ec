/**
 * `hostArena`: pinned host memory that producers build a batch's meta-data
 * in, so that `startCopy` sends it without the packing copy.
 *
 * The arena is one pinned block handed out front to back (a bump
 * allocator): every view starts at a multiple of 16 bytes, so neighbours
 * keep the alignment packed outputs have. `startCopy` recognises views of an
 * arena (raw, or wrapped with `Tensor.from`) and sends each run of
 * neighbours with one DMA from where they lie. While a copy reads the arena
 * it holds it: `reset()` and `dispose()` throw until the copy settles, so a
 * region is never handed out again while the GPU may still read it.
 *
 * The memory itself (pinned or not, its finalizer and count) is in
 * `arena_memory.ts`; what a view and the arguments may be, in
 * `arena_views.ts`.
 *
 * @module
 */

import { allocateArena, type ArenaBacking, checkArenaIdle, freeArena } from "./arena_memory.ts";
import {
  ARENA_ALIGNMENT,
  type ArrayClass,
  checkCount,
  classUsedArena,
  elementSize,
  noRoom,
  notAView,
} from "./arena_views.ts";

// Set by HostArena's static block: the constructor is not the users' to call.
let construct: (bytes: number) => HostArena;
const CONSTRUCT = Symbol("HostArena");

/**
 * Pinned host memory that typed views are carved from, front to back. Made
 * by {@linkcode hostArena} (the class cannot be constructed directly: `new
 * HostArena()` throws a `TypeError`); see there.
 *
 * @example Views carved front to back
 * ```ts
 * import assert from "node:assert/strict";
 * import { HostArena, hostArena } from "@mtc/core";
 * using arena = hostArena(1024);
 * assert.ok(arena instanceof HostArena);
 * assert.equal(arena.float32(4).byteOffset, 0);
 * assert.equal(arena.int64(2).byteOffset, 16);
 * ```
 */
export class HostArena {
  readonly #owned: ArenaBacking;
  readonly #bytes: number;
  #used = 0;
  // Shared with the holds that copies take (arena_memory.ts), which must not
  // reach the arena itself (nothing but the arena needs to keep it).
  readonly #copies = { inFlight: 0 };
  #disposed = false;

  static {
    construct = (bytes) => new HostArena(CONSTRUCT, bytes);
  }

  private constructor(key: symbol, bytes: number) {
    if (key !== CONSTRUCT) {
      throw new TypeError("Cannot construct a HostArena directly: use hostArena(bytes)");
    }
    checkCount(bytes, "bytes", 1);
    this.#bytes = bytes;
    this.#owned = allocateArena(bytes, this.#copies);
  }

  /** Whether the memory is pinned (false where no CUDA device is usable). */
  get pinned(): boolean {
    return this.#owned.address !== 0;
  }

  /** Address of the first byte (0 where not pinned). */
  get address(): number {
    return this.#owned.address;
  }

  /** Size of the arena in bytes. */
  get byteLength(): number {
    return this.#bytes;
  }

  /** Bytes handed out since creation or the last `reset()`, padding included. */
  get usedBytes(): number {
    return this.#used;
  }

  /** Copies in flight that read the arena. */
  get copiesInFlight(): number {
    return this.#copies.inFlight;
  }

  /** `length` float32 elements. */
  float32(length: number): Float32Array {
    return this.array(Float32Array, length);
  }

  /** `length` float64 elements. */
  float64(length: number): Float64Array {
    return this.array(Float64Array, length);
  }

  /** `length` int8 elements. */
  int8(length: number): Int8Array {
    return this.array(Int8Array, length);
  }

  /** `length` int16 elements. */
  int16(length: number): Int16Array {
    return this.array(Int16Array, length);
  }

  /** `length` int32 elements. */
  int32(length: number): Int32Array {
    return this.array(Int32Array, length);
  }

  /** `length` int64 elements. */
  int64(length: number): BigInt64Array {
    return this.array(BigInt64Array, length);
  }

  /** `length` uint8 elements (also for bool: wrap with `Tensor.from(view, shape, "bool")`). */
  uint8(length: number): Uint8Array {
    return this.array(Uint8Array, length);
  }

  /** `length` uint16 elements (also for float16 and bfloat16 bits). */
  uint16(length: number): Uint16Array {
    return this.array(Uint16Array, length);
  }

  /** `length` uint32 elements. */
  uint32(length: number): Uint32Array {
    return this.array(Uint32Array, length);
  }

  /** `length` uint64 elements. */
  uint64(length: number): BigUint64Array {
    return this.array(BigUint64Array, length);
  }

  /**
   * `length` elements of TypedArray class `cls`, zero-filled only if the
   * memory was never handed out before (after `reset()` it holds old bytes).
   *
   * @throws {TypeError} for a class that is not a TypedArray class (its
   * `BYTES_PER_ELEMENT` is not 1, 2, 4 or 8, as for `DataView`), or that
   * made something other than a view of `length` elements at the offset
   * @throws {TypeError} for a length that is not a number
   * @throws {RangeError} for a length that is not a whole number >= 0, or
   * when the arena has no room left, naming the sizes
   */
  array<A extends ArrayBufferView>(cls: ArrayClass<A>, length: number): A {
    if (this.#disposed) throw new Error("Cannot use a disposed hostArena");
    const size = elementSize(cls);
    checkCount(length, "length", 0);
    const bytes = length * size;
    const offset = Math.ceil(this.#used / ARENA_ALIGNMENT) * ARENA_ALIGNMENT;
    const end = offset + bytes;
    if (end > this.#bytes) throw noRoom(bytes, this.#used, this.#bytes);
    const used = this.#used;
    const view = new cls(this.#owned.buffer, offset, length);
    // A class of the user's that called back into this arena (array(),
    // reset(), dispose()) handed out or freed these bytes meanwhile.
    if (this.#used !== used || this.#disposed) throw classUsedArena(cls);
    // Handed out only once it is what it claims: a view of exactly those bytes.
    if (
      !ArrayBuffer.isView(view) || view.buffer !== this.#owned.buffer ||
      view.byteOffset !== offset || view.byteLength !== bytes
    ) throw notAView(cls, length);
    this.#used = end;
    return view;
  }

  /**
   * Hands the whole arena out again from the start (views from before now
   * alias new ones: build the next batch only once the previous copy's
   * `get()` resolved).
   *
   * @throws {Error} while a copy in flight reads the arena, or once the
   * arena was disposed
   */
  reset(): void {
    if (this.#disposed) throw new Error("Cannot use a disposed hostArena");
    checkArenaIdle(this.#copies, "reset");
    this.#used = 0;
  }

  /**
   * Frees the pinned memory now; every view of it becomes empty. Without
   * it, a finalizer frees the memory once the arena and all its views are
   * unreachable, as a fallback. The memory is freed even when a view's
   * buffer was detached (`transfer()`, or posted to a Worker); a buffer
   * moved that way still points at it, so such a buffer must not be used
   * after `dispose()`.
   *
   * @throws {Error} while a copy in flight reads the arena
   */
  dispose(): void {
    if (this.#disposed) return;
    checkArenaIdle(this.#copies, "dispose");
    this.#disposed = true;
    freeArena(this.#owned, this.#bytes);
  }

  /** Same as `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * Pinned host memory of `bytes` bytes that a producer builds meta-data in:
 * `startCopy` sends views of it (raw or wrapped with `Tensor.from`) straight
 * from where they lie, one DMA per run of neighbours, with no packing copy.
 * Views start at multiples of 16 bytes. Reuse it with `reset()` once the
 * copies that read it have completed (until then `reset()` throws); free it
 * with `dispose()`. Where no CUDA device is usable the arena is ordinary
 * memory (`pinned` is false) and the same code still runs.
 *
 * @param bytes the arena's size
 * @returns the arena
 * @throws {TypeError} for a size that is not a number
 * @throws {RangeError} for a size that is not a whole number >= 1
 * @throws {CudaError} when pinned memory cannot be allocated
 *
 * @example Build a batch in pinned memory and send it without packing
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount, disposeAll, hostArena, startCopy } from "@mtc/core";
 * using arena = hostArena(1 << 20);
 * const boxes = arena.float32(4 * 8);
 * const ids = arena.int64(8);
 * boxes.fill(0.5);
 * const onDevice = await startCopy({ boxes, ids }, deviceCount() > 0 ? "cuda:0" : "cpu").get();
 * assert.equal(onDevice.boxes.numel, 32);
 * assert.equal(onDevice.ids.dtype, "int64");
 * disposeAll(onDevice);
 * ```
 */
export function hostArena(bytes: number): HostArena {
  return construct(bytes);
}
