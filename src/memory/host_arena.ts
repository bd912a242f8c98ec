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
 * @module
 */

import { hostAlloc, hostArrayBuffer, hostFree } from "../../ffi/native.ts";
import {
  arenaCollected,
  type ArenaMemory,
  registerArena,
  unregisterArena,
} from "../arena_index.ts";
import { deviceCount } from "../device.ts";
import { shown } from "../shown.ts";

/** Every view an arena hands out starts at a multiple of this. */
export const ARENA_ALIGNMENT = 16;

/** A TypedArray class, as `array()` takes it. */
export interface ArrayClass<A extends ArrayBufferView> {
  /** A view of `length` elements at `byteOffset`. */
  new (buffer: ArrayBuffer, byteOffset: number, length: number): A;
  /** Element size. */
  readonly BYTES_PER_ELEMENT: number;
}

interface Owned {
  address: number;
  buffer: ArrayBuffer;
}

// Keyed on the buffer, not the arena: views keep the buffer alive, so the
// memory goes only when the arena and every view of it are unreachable.
const registry = new FinalizationRegistry<{ address: number; bytes: number }>(
  ({ address, bytes }) => {
    hostFree(address);
    pinnedArenas--;
    pinnedArenaBytes -= bytes;
    arenaCollected();
  },
);

/** Pinned arenas not freed yet, and their bytes (for `memoryStats`). */
let pinnedArenas = 0;
let pinnedArenaBytes = 0;

/**
 * The pinned host arenas that exist now and their bytes (outside the
 * pools; arenas of ordinary memory, made without a GPU, do not count).
 */
export function arenaMemory(): { arenas: number; bytes: number } {
  return { arenas: pinnedArenas, bytes: pinnedArenaBytes };
}

function free({ address, buffer }: Owned, bytes: number): void {
  unregisterArena(buffer);
  // Every view becomes empty before the memory goes. A buffer the user
  // detached (`transfer()`, or posted to a Worker) has nothing left to
  // detach here, and the memory must go all the same.
  if (!buffer.detached) buffer.transfer(0);
  if (address === 0) return;
  pinnedArenas--;
  pinnedArenaBytes -= bytes;
  hostFree(address);
}

/** The element sizes of TypedArray classes. */
const ELEMENT_SIZES: ReadonlySet<unknown> = new Set([1, 2, 4, 8]);

function className(cls: unknown): string {
  if (typeof cls === "function") return cls.name ? `class ${cls.name}` : "an anonymous class";
  return cls === null ? "null" : typeof cls;
}

/** Checks a size argument: TypeError for a non-number, RangeError out of range. */
function checkCount(value: unknown, name: string, min: number): void {
  if (typeof value !== "number") {
    throw new TypeError(`Invalid hostArena ${name}: expected a number, got ${shown(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(
      `Invalid hostArena ${name}: expected a whole number >= ${min}, got ${shown(value)}`,
    );
  }
}

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
  readonly #owned: Owned;
  readonly #bytes: number;
  #used = 0;
  // Shared with the registered ArenaMemory, which must not reach the arena
  // itself (nothing but the arena needs to keep it).
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
    if (deviceCount() > 0) {
      const address = hostAlloc(bytes);
      this.#owned = { address, buffer: hostArrayBuffer(address, bytes) };
      // What copies see of the arena (holds are not the user's to take).
      const copies = this.#copies;
      const memory: ArenaMemory = {
        address,
        hold: () => void copies.inFlight++,
        release: () => void copies.inFlight--,
      };
      registerArena(this.#owned.buffer, memory);
    } else {
      // No CUDA: ordinary memory, so that the same code runs on the CPU.
      this.#owned = { address: 0, buffer: new ArrayBuffer(bytes) };
    }
    if (this.#owned.address !== 0) {
      pinnedArenas++;
      pinnedArenaBytes += bytes;
      registry.register(this.#owned.buffer, { address: this.#owned.address, bytes }, this.#owned);
    }
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
    const size = typeof cls === "function" ? cls.BYTES_PER_ELEMENT : undefined;
    if (!ELEMENT_SIZES.has(size)) {
      throw new TypeError(
        `Invalid hostArena class: expected a TypedArray class (BYTES_PER_ELEMENT 1, 2, 4 or 8), ` +
          `got ${className(cls)}`,
      );
    }
    checkCount(length, "length", 0);
    const bytes = length * (size as number);
    const offset = Math.ceil(this.#used / ARENA_ALIGNMENT) * ARENA_ALIGNMENT;
    const end = offset + bytes;
    if (end > this.#bytes) {
      throw new RangeError(
        `Cannot carve ${bytes} more bytes from the host arena: they do not fit (${this.#used} of ` +
          `${this.#bytes} used); make the arena larger or reset() it`,
      );
    }
    const used = this.#used;
    const view = new cls(this.#owned.buffer, offset, length);
    // A class of the user's that called back into this arena (array(),
    // reset(), dispose()) handed out or freed these bytes meanwhile.
    if (this.#used !== used || this.#disposed) {
      throw new TypeError(
        `Invalid hostArena class: ${
          className(cls)
        } used the arena while it was making a view of it`,
      );
    }
    // Handed out only once it is what it claims: a view of exactly those bytes.
    if (
      !ArrayBuffer.isView(view) || view.buffer !== this.#owned.buffer ||
      view.byteOffset !== offset || view.byteLength !== bytes
    ) {
      throw new TypeError(
        `Invalid hostArena class: expected a TypedArray class, got ${className(cls)}, ` +
          `which made something else than a view of ${length} elements`,
      );
    }
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
    this.#checkIdle("reset");
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
    this.#checkIdle("dispose");
    this.#disposed = true;
    registry.unregister(this.#owned);
    free(this.#owned, this.#bytes);
  }

  /** Same as `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  #checkIdle(what: string): void {
    const inFlight = this.#copies.inFlight;
    if (inFlight > 0) {
      throw new Error(
        `Cannot ${what} a hostArena that ${inFlight} copies in flight still read; ` +
          `await their get() first`,
      );
    }
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
