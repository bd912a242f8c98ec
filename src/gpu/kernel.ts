/**
 * `Kernel`: one kernel of a loaded module, and its launches.
 *
 * A launch is one fast FFI call (`mtc_launch`) over a buffer the kernel
 * reuses: eight uint32 of configuration, then the arguments laid out as the
 * kernel's parameters (each aligned to its size), which the driver copies
 * when the launch is queued. Nothing is allocated per launch but the
 * returned work (and the list of its holds when tensors are passed).
 *
 * A launch ordered after a copy that is not queued yet is queued once it
 * is (see gpu/work.ts, "Work not queued yet"); the returned work exists at
 * once.
 *
 * Bad configurations are refused before the driver sees them, with the
 * limits the driver gives for the kernel (`cuFuncGetAttribute`: threads per
 * block, dynamic shared memory), so that a refused launch is a
 * `RangeError` naming the argument, not a failed driver call.
 *
 * @module
 */

import { type FunctionLimits, launch, LAUNCH_HEADER_BYTES } from "../../ffi/kernel_modules.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import { argError, parameterOffsets, type ParamType, rangeError } from "./kernel_params.ts";
import { type DeviceIndex, deviceName } from "../device.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";
import type { Storage } from "../memory/storage.ts";
import { Tensor, tensorInternals } from "../tensor.ts";
import { type After, checkAfter, notQueuedYet, orderAfter, orderAfterOn } from "./after.ts";
import {
  checkStream,
  type CudaStream,
  defaultStreamOf,
  describe,
  streamAddress,
} from "./stream.ts";
import { deferWork, type GpuWork, makeWork, reapWork } from "./work.ts";
import { noteWorkHolds } from "../reuse/holders.ts";

/** Grid or block dimensions: `x`, or `[x, y?, z?]`. */
export type Dim3 = number | readonly [number, number?, number?];

/** How to launch a kernel (see {@linkcode Kernel.launch}). */
export interface LaunchConfig {
  /** Blocks in the grid: `x` or `[x, y, z]` (each an integer >= 1). */
  grid: Dim3;
  /** Threads per block: `x` or `[x, y, z]` (each an integer >= 1). */
  block: Dim3;
  /** Dynamic shared memory per block, in bytes (default 0). */
  sharedBytes?: number;
  /** One argument per parameter, checked against its declared type. */
  args: readonly (Tensor | number | bigint)[];
  /** The stream to queue it on (default: the device's default compute stream). */
  stream?: CudaStream;
  /** Work the kernel must run after, ordered on the GPU (no CPU wait). */
  after?: After | readonly After[];
}

const KNOWN = new Set(["grid", "block", "sharedBytes", "args", "stream", "after"]);
const TWO_32 = 2 ** 32;
const TWO_63 = 2n ** 63n;
const TWO_64 = 2n ** 64n;

/** What a kernel's module must do around launches (library-internal). */
export interface KernelOwner {
  /** Throws when the module was disposed. */
  assertLive(what: string): void;
  /** Counts a launch in flight. */
  begin(): void;
  /** Ends a launch counted by `begin` (called when its work settles). */
  readonly end: () => void;
}

/** Grid and block dimensions at most, x y z (the device limits of every GPU CUDA runs on). */
const MAX_GRID = [0x7fffffff, 65535, 65535];
const MAX_BLOCK = [1024, 1024, 64];

/**
 * A kernel of a module loaded with `loadModule`, with its declared
 * parameter types. Get one with `CudaModule.kernel()`.
 *
 * @example Launch a kernel on a copied tensor and copy the result back
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount, loadModule, startCopy } from "@mtc/core";
 * // fill_u32(dst, value): dst[threadIdx.x] = value
 * const ptx = `.version 7.0
 * .target sm_75
 * .address_size 64
 * .visible .entry fill_u32(.param .u64 dst, .param .u32 value) {
 *   .reg .b32 %r<3>; .reg .b64 %rd<4>;
 *   ld.param.u64 %rd1, [dst]; ld.param.u32 %r1, [value];
 *   cvta.to.global.u64 %rd2, %rd1; mov.u32 %r2, %tid.x;
 *   mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
 *   st.global.u32 [%rd2], %r1; ret;
 * }`;
 * if (deviceCount() > 0) {
 *   const module = await loadModule(ptx, { device: "cuda:0" });
 *   const fill = module.kernel("fill_u32", ["ptr", "u32"]);
 *   const [out] = await startCopy([new Uint32Array(4)], "cuda:0").get();
 *   const work = fill.launch({ grid: 1, block: 4, args: [out, 7] });
 *   const [back] = await startCopy([out], "cpu", { after: work }).get();
 *   assert.deepEqual([...back.toTypedArray()], [7, 7, 7, 7]);
 *   out.dispose();
 *   module.dispose();
 * }
 * ```
 */
export class Kernel {
  /** The kernel's name in its module. */
  readonly name: string;
  /** Its parameter types, as declared. */
  readonly params: readonly ParamType[];
  readonly #device: DeviceIndex;
  readonly #function: number;
  readonly #owner: KernelOwner;
  readonly #what: string;
  readonly #maxThreads: number;
  readonly #maxSharedBytes: number;
  readonly #offsets: Int32Array;
  readonly #config: Uint8Array;
  readonly #u32: Uint32Array;
  readonly #i32: Int32Array;
  readonly #f32: Float32Array;
  readonly #f64: Float64Array;
  readonly #b64: BigUint64Array;

  /**
   * Library-internal: made by `CudaModule.kernel()`; `limits` where the
   * driver gave them.
   */
  constructor(
    owner: KernelOwner,
    device: DeviceIndex,
    fn: number,
    name: string,
    params: readonly ParamType[],
    limits?: FunctionLimits,
  ) {
    this.#owner = owner;
    this.#device = device;
    this.#function = fn;
    this.name = name;
    this.#what = `kernel "${name}"`;
    this.#maxThreads = limits?.maxThreadsPerBlock ?? 1024;
    this.#maxSharedBytes = limits?.maxDynamicSharedBytes ?? TWO_32 - 1;
    this.params = Object.freeze([...params]);
    const offsets = parameterOffsets(params);
    // Offsets in the launch buffer, past its header.
    this.#offsets = offsets.offsets.map((offset) => offset + LAUNCH_HEADER_BYTES);
    // Whole 8-byte words, so that every typed view below fits it.
    const buffer = new ArrayBuffer(LAUNCH_HEADER_BYTES + Math.ceil(offsets.bytes / 8) * 8);
    this.#config = new Uint8Array(buffer);
    this.#u32 = new Uint32Array(buffer);
    this.#i32 = new Int32Array(buffer);
    this.#f32 = new Float32Array(buffer);
    this.#f64 = new Float64Array(buffer);
    this.#b64 = new BigUint64Array(buffer);
    this.#u32[7] = offsets.bytes;
  }

  /** `"cuda:N"`, the device of the kernel's module. */
  get device(): string {
    return deviceName(this.#device);
  }

  /**
   * Queues the kernel on a stream; returns at once. Every `Tensor` argument
   * passes its device address and is held until the work completes (a
   * `dispose()` meanwhile is deferred). With `after`, the kernel waits on
   * the GPU for that work first.
   *
   * @param config grid, block, dynamic shared bytes, arguments, stream, after
   * @returns the queued work: `ready()`, `done()`, `enqueueWait(stream)`
   * @throws {TypeError} for a missing or unknown option, an argument of the
   * wrong type or count, a disposed tensor, a CPU tensor, or a disposed module
   * @throws {RangeError} for dimensions or numbers out of range (more
   * threads per block or dynamic shared memory than the kernel can have), a
   * tensor or stream of another device
   * @throws {CudaError} when the driver refuses the launch (e.g. too many
   * threads per block), or the device's context is broken by an earlier fault
   */
  launch(config: LaunchConfig): GpuWork {
    reapWork();
    if (typeof config !== "object" || config === null) {
      throw new TypeError(`Invalid config: expected an object, got ${describe(config)}`);
    }
    // Own keys, as startCopy reads its options: an enumerable key someone
    // put on Object.prototype made every launch throw.
    for (const key of Object.keys(config)) {
      if (!KNOWN.has(key)) {
        throw new TypeError(
          `Invalid config option "${key}": expected one of ${[...KNOWN].join(", ")}`,
        );
      }
    }
    this.#owner.assertLive(`launch kernel "${this.name}"`);
    const u32 = this.#u32;
    writeDim3(u32, 0, own(config, "grid"), "grid", MAX_GRID);
    writeDim3(u32, 3, own(config, "block"), "block", MAX_BLOCK);
    const threads = u32[3] * u32[4] * u32[5];
    if (threads > this.#maxThreads) {
      throw new RangeError(
        `Invalid block: expected at most ${this.#maxThreads} threads per block for ${this.#what}, got ${threads}`,
      );
    }
    const shared = own(config, "sharedBytes") ?? 0;
    if (!Number.isInteger(shared) || shared < 0 || shared > this.#maxSharedBytes) {
      throw new RangeError(
        `Invalid sharedBytes: expected an integer from 0 to ${this.#maxSharedBytes} (the dynamic shared memory ${this.#what} can have), got ${
          describe(shared)
        }`,
      );
    }
    u32[6] = shared;
    const after = own(config, "after") === undefined
      ? undefined
      : checkAfter(own(config, "after"), "after", true);
    const holds = this.#writeArgs(own(config, "args"));
    // Last: every argument is checked before the default stream's first
    // use creates it (a CUDA call).
    const stream = own(config, "stream") === undefined
      ? defaultStreamOf(this.#device)
      : checkStream(own(config, "stream"), "stream", this.#device);
    const address = streamAddress(stream);
    const notQueued = notQueuedYet(after, this.#device, address);
    if (notQueued !== undefined) return this.#launchLater(stream, after ?? [], holds, notQueued);
    if (after !== undefined) orderAfter(stream, after);
    const event = this.#queue(address, this.#config);
    if (holds) { for (const storage of holds) storage.retain(); }
    this.#owner.begin();
    const work = makeWork(this.#device, address, event, this.#what, holds, this.#owner.end);
    if (holds) noteWorkHolds(work, holds);
    return work;
  }

  /** Launches on `stream` with `config`; returns the event recorded after it. */
  #queue(stream: number, config: Uint8Array): number {
    const event = acquireEvent(this.#device);
    const status = launch(this.#device, this.#function, stream, event, config);
    if (status !== 0) {
      releaseEvent(this.#device, event);
      throw cudaError(status, `launch ${this.#what} on ${this.device}`);
    }
    return event;
  }

  /**
   * A launch ordered after work that is not queued yet: queued once it is
   * (gpu/work.ts, "Work not queued yet"), from a copy of the launch buffer;
   * the arguments are held from now on.
   */
  #launchLater(
    stream: CudaStream,
    after: readonly After[],
    holds: Storage[] | undefined,
    ready: Promise<void>,
  ): GpuWork {
    const config = this.#config.slice();
    const address = streamAddress(stream);
    if (holds) { for (const storage of holds) storage.retain(); }
    this.#owner.begin();
    const work = deferWork(
      this.#device,
      address,
      this.#what,
      ready,
      () => {
        // The stream may have been disposed since: it is destroyed only after this.
        orderAfterOn(this.#device, address, after);
        return this.#queue(address, config);
      },
      holds,
      this.#owner.end,
    );
    if (holds) noteWorkHolds(work, holds);
    return work;
  }

  /** Shows the name, parameters and device in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `Kernel(${this.name}(${this.params.join(", ")}), ${this.device})`;
  }

  /** Writes the arguments into the launch buffer; returns the storages to hold. */
  #writeArgs(args: unknown): Storage[] | undefined {
    const params = this.params;
    if (!Array.isArray(args)) {
      throw new TypeError(`Invalid args: expected an array, got ${describe(args)}`);
    }
    if (args.length !== params.length) {
      throw new TypeError(
        `Invalid args: kernel "${this.name}" takes ${params.length} argument${
          params.length === 1 ? "" : "s"
        } (${params.join(", ")}), got ${args.length}`,
      );
    }
    let holds: Storage[] | undefined;
    for (let i = 0; i < params.length; i++) {
      const arg = args[i];
      const type = params[i];
      const at = this.#offsets[i];
      if (arg instanceof Tensor) {
        if (type !== "ptr") throw argError(i, type, arg);
        if (arg.disposed) throw new TypeError(`Invalid args[${i}]: the tensor was disposed`);
        const device = tensorInternals.device(arg);
        if (device !== this.#device) {
          const error =
            `Invalid args[${i}]: expected a tensor on ${this.device}, got one on ${arg.device}`;
          throw device < 0 ? new TypeError(error) : new RangeError(error);
        }
        const storage = tensorInternals.storage(arg);
        let address = 0;
        if (storage !== undefined) {
          address = tensorInternals.address(arg);
          (holds ??= []).push(storage);
        }
        this.#u32[at >> 2] = address % TWO_32;
        this.#u32[(at >> 2) + 1] = Math.floor(address / TWO_32);
      } else if (typeof arg === "bigint") {
        if (type === "f32" || type === "f64" || type === "i32" || type === "u32") {
          throw argError(i, type, arg);
        }
        const signed = type === "i64";
        if (signed ? arg < -TWO_63 || arg >= TWO_63 : arg < 0n || arg >= TWO_64) {
          throw new RangeError(`Invalid args[${i}]: ${arg} is out of range for ${type}`);
        }
        this.#b64[at >> 3] = BigInt.asUintN(64, arg);
      } else if (typeof arg === "number") {
        this.#writeNumber(i, type, at, arg);
      } else {
        throw argError(i, type, arg);
      }
    }
    return holds;
  }

  #writeNumber(i: number, type: ParamType, at: number, value: number): void {
    switch (type) {
      case "f32":
        this.#f32[at >> 2] = value;
        return;
      case "f64":
        this.#f64[at >> 3] = value;
        return;
      case "ptr":
        throw argError(i, type, value);
    }
    if (!Number.isInteger(value)) {
      throw new RangeError(`Invalid args[${i}]: expected an integer for ${type}, got ${value}`);
    }
    switch (type) {
      case "i32":
        if (value < -(2 ** 31) || value >= 2 ** 31) throw rangeError(i, type, value);
        this.#i32[at >> 2] = value;
        return;
      case "u32":
        if (value < 0 || value >= TWO_32) throw rangeError(i, type, value);
        this.#u32[at >> 2] = value;
        return;
      default: {
        // i64 / u64 from a safe integer, written as two 32-bit halves.
        if (!Number.isSafeInteger(value) || (type === "u64" && value < 0)) {
          throw rangeError(i, type, value);
        }
        const low = ((value % TWO_32) + TWO_32) % TWO_32;
        this.#u32[at >> 2] = low;
        this.#u32[(at >> 2) + 1] = (value - low) / TWO_32;
      }
    }
  }
}

function writeDim3(
  into: Uint32Array,
  at: number,
  value: unknown,
  what: string,
  maxima: readonly number[],
): void {
  const dims = typeof value === "number" ? [value] : value;
  if (!Array.isArray(dims) || dims.length < 1 || dims.length > 3) {
    throw new TypeError(
      `Invalid ${what}: expected a number or [x, y?, z?], got ${describe(value)}`,
    );
  }
  for (let d = 0; d < 3; d++) {
    const n = dims[d] ?? 1;
    const max = maxima[d];
    if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > max) {
      throw new RangeError(
        `Invalid ${what}${
          typeof value === "number" ? "" : `[${d}]`
        }: expected an integer from 1 to ${max}, got ${describe(n)}`,
      );
    }
    into[at + d] = n;
  }
}

// A launch config's own value of `key` (the keys were checked), without
// allocating: an inherited grid is no grid.
function own<K extends keyof LaunchConfig>(config: LaunchConfig, key: K): LaunchConfig[K] {
  return Object.hasOwn(config, key) ? config[key] : undefined as LaunchConfig[K];
}
