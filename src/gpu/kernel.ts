/**
 * `Kernel`: one kernel of a loaded module, and its launches.
 *
 * A launch is one fast FFI call (`mtc_launch`) over a buffer the kernel
 * reuses (gpu/launch_buffer.ts): the configuration, then the arguments,
 * which the driver copies when the launch is queued. Nothing is allocated
 * per launch but the returned work (and the list of its holds when tensors
 * are passed).
 *
 * A launch ordered after a copy that is not queued yet is queued once it
 * is (see gpu/deferred_work.ts, "Work not queued yet"); the returned work
 * exists at once.
 *
 * Bad configurations are refused before the driver sees them, with the
 * limits the driver gives for the kernel (gpu/launch_config.ts), so that a
 * refused launch is a `RangeError` naming the argument, not a failed
 * driver call.
 *
 * @module
 */

import { type FunctionLimits, launch } from "../../ffi/kernel_modules.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import type { ParamType } from "./kernel_params.ts";
import { type DeviceIndex, deviceName } from "../device.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";
import type { Storage } from "../memory/storage.ts";
import {
  type After,
  capturedAfter,
  checkAfter,
  notQueuedYet,
  orderAfter,
  orderAfterOn,
} from "./after.ts";
import { checkStream, type CudaStream, streamAddress } from "./stream.ts";
import { defaultStreamOf } from "./device_streams.ts";
import { LaunchBuffer } from "./launch_buffer.ts";
import {
  checkConfigKeys,
  type KernelLimits,
  type LaunchConfig,
  own,
  writeLaunchHeader,
} from "./launch_config.ts";
import { deferWork } from "./deferred_work.ts";
import { failedWork, type GpuWork, makeWork, reapWork } from "./work.ts";
import { noteWorkHolds } from "../reuse/holders.ts";

/** What a kernel's module must do around launches (library-internal). */
export interface KernelOwner {
  /** Throws when the module was disposed. */
  assertLive(what: string): void;
  /** Counts a launch in flight. */
  begin(): void;
  /** Ends a launch counted by `begin` (called when its work settles). */
  readonly end: () => void;
}

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
  readonly #limits: KernelLimits;
  readonly #buffer: LaunchBuffer;

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
    this.#limits = {
      maxThreads: limits?.maxThreadsPerBlock ?? 1024,
      maxSharedBytes: limits?.maxDynamicSharedBytes ?? 2 ** 32 - 1,
    };
    this.params = Object.freeze([...params]);
    this.#buffer = new LaunchBuffer(name, device, this.params);
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
   * (work named in `after` that failed, already or later, fails the returned
   * work instead: its `done()` rejects with that failure)
   */
  launch(config: LaunchConfig): GpuWork {
    reapWork();
    checkConfigKeys(config);
    this.#owner.assertLive(`launch kernel "${this.name}"`);
    writeLaunchHeader(config, this.#buffer.u32, this.#limits, this.#what);
    const after = own(config, "after") === undefined
      ? undefined
      : checkAfter(own(config, "after"), "after", true);
    const holds = this.#buffer.writeArgs(own(config, "args"));
    // Last: every argument is checked before the default stream's first
    // use creates it (a CUDA call).
    const stream = own(config, "stream") === undefined
      ? defaultStreamOf(this.#device)
      : checkStream(own(config, "stream"), "stream", this.#device);
    const address = streamAddress(stream);
    const notQueued = notQueuedYet(after, this.#device, address);
    if (notQueued !== undefined) return this.#launchLater(stream, after ?? [], holds, notQueued);
    if (after !== undefined) {
      try {
        orderAfter(stream, after);
      } catch (error) {
        // Work it names failed already (or the wait for it could not be
        // queued): the launch fails as it does when that work fails a
        // moment later, through done(), never by throwing here.
        return failedWork(this.#device, address, this.#what, error);
      }
    }
    const event = this.#queue(address, this.#buffer.bytes);
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
   * (gpu/deferred_work.ts, "Work not queued yet"), from a copy of the launch buffer;
   * the arguments are held from now on.
   */
  #launchLater(
    stream: CudaStream,
    after: readonly After[],
    holds: Storage[] | undefined,
    ready: Promise<void>,
  ): GpuWork {
    const config = this.#buffer.bytes.slice();
    const address = streamAddress(stream);
    // The streams named in `after` as they are now (they may be disposed by then).
    const ordered = capturedAfter(after);
    if (holds) { for (const storage of holds) storage.retain(); }
    this.#owner.begin();
    const work = deferWork(
      this.#device,
      address,
      this.#what,
      ready,
      () => {
        // The stream may have been disposed since: it is destroyed only after this.
        orderAfterOn(this.#device, address, ordered);
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
}
