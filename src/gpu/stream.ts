/**
 * `CudaStream`: a queue of GPU work on one device, for users' kernels and
 * their own FFI code.
 *
 * Each device has two library streams: the copy stream, on which every copy
 * and every stream-ordered free of the library is queued (not handed out:
 * its order is what makes pooled device memory safe to reuse), and a
 * default compute stream for users' kernels (`defaultStream`), so that the
 * next copy overlaps them. Users may create streams or wrap one another
 * library owns ({@linkcode CudaStream.fromHandle}); gpu/device_streams.ts
 * makes the created and library ones.
 *
 * @module
 */

import { MTC_E_WRONG_DEVICE } from "../../ffi/cuda_error.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import {
  streamCheck,
  streamDestroy,
  streamStatus,
  streamWaitIdleOffThread,
} from "../../ffi/streams.ts";
import { type DeviceIndex, deviceName } from "../device.ts";
import { describe, parseCudaDevice } from "./arguments.ts";
import { streamTail } from "./stream_tail.ts";

/** A stream made by `createStream`: its `dispose()` destroys it. */
export const OWNED = 0;
/** One of the library's own streams (default compute, copy): never destroyed. */
export const LIBRARY = 1;
const FOREIGN = 2;

let addressOf: (stream: CudaStream) => number;
let indexOf: (stream: CudaStream) => DeviceIndex;
let make: (index: DeviceIndex, address: number, kind: number) => CudaStream;

// Set only while the library constructs a CudaStream.
let constructing = false;

/**
 * A CUDA stream of one device: work queued on it runs in order; work on
 * different streams may overlap. Order streams against each other with
 * `enqueueWait` or `after`, never with a CPU wait.
 *
 * @example Your own stream, ordered after a copy on the GPU
 * ```ts
 * import assert from "node:assert/strict";
 * import { createStream, deviceCount, startCopy } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   using stream = createStream("cuda:0");
 *   const handle = startCopy([new Float32Array(4)], "cuda:0");
 *   handle.enqueueWait(stream); // returns at once: the GPU waits, not the CPU
 *   await stream.synchronize();
 *   assert.equal(typeof stream.handle, "bigint");
 *   (await handle.get())[0].dispose();
 * }
 * ```
 */
export class CudaStream {
  readonly #index: DeviceIndex;
  readonly #device: string;
  readonly #address: number;
  readonly #kind: number;
  #disposed = false;
  /** Disposed by its user, destroyed once its launches not queued yet are. */
  #closing = false;

  private constructor(index: DeviceIndex, address: number, kind: number) {
    // Private only to TypeScript: a forged stream (a made-up address that
    // dispose() would destroy) is refused at run time.
    if (!constructing) {
      throw new TypeError(
        "Cannot construct a CudaStream directly: use createStream(), defaultStream() or CudaStream.fromHandle()",
      );
    }
    this.#index = index;
    this.#device = deviceName(index);
    this.#address = address;
    this.#kind = kind;
  }

  static {
    addressOf = (stream) => {
      if (stream.#disposed) throw new Error(`Cannot use a disposed stream of ${stream.#device}`);
      return stream.#address;
    };
    indexOf = (stream) => stream.#index;
    make = (index, address, kind) => {
      constructing = true;
      try {
        return new CudaStream(index, address, kind);
      } finally {
        constructing = false;
      }
    };
  }

  /**
   * Wraps a stream that another library owns (a `CUstream` or
   * `cudaStream_t` of the device's primary context, which the CUDA runtime,
   * PyTorch and CuPy use; `0n` is the legacy default stream). The caller
   * keeps it alive while the wrapper is used; `dispose()` does not destroy
   * it. The handle must be a live stream: the driver cannot check that.
   *
   * @param handle the stream's handle
   * @param device `"cuda"` or `"cuda:N"`, the stream's device
   * @returns a wrapper over the same stream
   * @throws {TypeError} for a handle that is no bigint, or a malformed device
   * @throws {RangeError} for a negative or too large handle, or a stream of
   * another device or context
   * @throws {CudaError} when the driver refuses the handle
   *
   * @example The legacy default stream
   * ```ts
   * import assert from "node:assert/strict";
   * import { CudaStream, deviceCount } from "@mtc/core";
   * if (deviceCount() > 0) {
   *   const legacy = CudaStream.fromHandle(0n, "cuda:0");
   *   assert.equal(legacy.handle, 0n);
   * }
   * ```
   */
  static fromHandle(handle: bigint, device: string): CudaStream {
    if (typeof handle !== "bigint") {
      throw new TypeError(`Invalid handle: expected a bigint, got ${typeof handle}`);
    }
    if (handle < 0n || handle >= 2n ** 53n) {
      throw new RangeError(`Invalid handle: expected a CUstream address, got ${handle}`);
    }
    const index = parseCudaDevice(device);
    const address = Number(handle);
    const status = streamCheck(index, address);
    if (status === MTC_E_WRONG_DEVICE) {
      throw new RangeError(
        `Invalid handle: expected a stream of ${
          deviceName(index)
        }'s primary context, got one of another device or context`,
      );
    }
    if (status !== 0) throw cudaError(status, `use stream ${handle} on ${deviceName(index)}`);
    return make(index, address, FOREIGN);
  }

  /** `"cuda:N"`. */
  get device(): string {
    return this.#device;
  }

  /** The `CUstream` handle, for your own FFI code (valid while the stream is). */
  get handle(): bigint {
    return BigInt(addressOf(this));
  }

  /** Whether {@linkcode CudaStream.dispose} was called. */
  get disposed(): boolean {
    return this.#disposed || this.#closing;
  }

  /**
   * Resolves once all work queued on the stream so far has completed. Never
   * blocks the event loop: a busy stream is waited for on a Deno
   * blocking-pool thread.
   *
   * @returns a Promise that rejects with a `CudaError` if the work failed
   */
  synchronize(): Promise<void> {
    const address = addressOf(this);
    // A launch ordered after a copy not queued yet is part of the stream's work.
    const tail = streamTail(this.#index, address);
    if (tail) return tail.queued.then(() => this.synchronize());
    const status = streamStatus(this.#index, address);
    if (status === 0) return Promise.resolve();
    const op = `synchronize a stream of ${this.#device}`;
    if (status !== -1) return Promise.reject(cudaError(status, op));
    return streamWaitIdleOffThread(this.#index, address).then((status) => {
      if (status !== 0) throw cudaError(status, op);
    });
  }

  /**
   * Destroys a stream made by {@linkcode createStream} (its queued work
   * still completes, launches ordered after a copy not queued yet
   * included); does nothing for the default stream or a wrapped one.
   * Calling it again does nothing.
   */
  dispose(): void {
    if (this.#disposed || this.#closing || this.#kind !== OWNED) return;
    const tail = streamTail(this.#index, this.#address);
    if (tail) {
      this.#closing = true;
      tail.queued.then(() => this.#destroy());
      return;
    }
    this.#destroy();
  }

  #destroy(): void {
    this.#disposed = true;
    streamDestroy(this.#index, this.#address);
  }

  /** Same as {@linkcode CudaStream.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Shows the device and handle in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    const kind = ["created", "default", "wrapped"][this.#kind];
    return `CudaStream(${this.#device}, ${kind}, 0x${this.#address.toString(16)}${
      this.disposed ? ", disposed" : ""
    })`;
  }
}

/**
 * Library-internal: a `CudaStream` (`kind` {@linkcode OWNED} or
 * {@linkcode LIBRARY}) over `address` of `index`, for gpu/device_streams.ts.
 */
export function makeStream(index: DeviceIndex, address: number, kind: number): CudaStream {
  return make(index, address, kind);
}

/** The address of a live stream (library-internal). @throws {Error} when disposed */
export function streamAddress(stream: CudaStream): number {
  return addressOf(stream);
}

/** The device index of a stream (library-internal). */
export function streamDevice(stream: CudaStream): DeviceIndex {
  return indexOf(stream);
}

/**
 * Checks that `value` is a live stream of `device` (when given), for an
 * argument called `what`.
 */
export function checkStream(value: unknown, what: string, device?: DeviceIndex): CudaStream {
  if (!(value instanceof CudaStream)) {
    throw new TypeError(`Invalid ${what}: expected a CudaStream, got ${describe(value)}`);
  }
  if (value.disposed) throw new TypeError(`Invalid ${what}: the stream was disposed`);
  if (device !== undefined && indexOf(value) !== device) {
    throw new RangeError(
      `Invalid ${what}: expected a stream of ${deviceName(device)}, got one of ${value.device}`,
    );
  }
  return value;
}
