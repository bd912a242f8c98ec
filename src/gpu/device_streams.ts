/**
 * Where a device's `CudaStream`s come from: `createStream` (a stream of the
 * user's own), and the library's two streams of each device, made on first
 * use and kept: the default compute stream (`defaultStream`, for users'
 * kernels) and the copy stream (never handed out: its order is what makes
 * pooled device memory safe to reuse). Apart from gpu/stream.ts, which is
 * the stream itself, because the memory rooms' ordering asks for the copy
 * stream and the kernels for the compute one, not for the class's
 * internals.
 *
 * @module
 */

import { libraryStream, streamCreate } from "../../ffi/streams.ts";
import type { DeviceIndex } from "../device.ts";
import { parseCudaDevice } from "./arguments.ts";
import { type CudaStream, LIBRARY, makeStream, OWNED } from "./stream.ts";

// One of each library stream per device, made on first use: a CUDA call
// that a CPU-only run never makes.
const defaults: CudaStream[] = [];
const copies: CudaStream[] = [];

/**
 * Creates a CUDA stream of `device` (non-blocking: it does not wait for the
 * legacy default stream). Dispose it when done (`using` works).
 *
 * @param device `"cuda"` or `"cuda:N"`
 * @returns the new stream
 * @throws {TypeError} for a malformed device or `"cpu"`
 * @throws {RangeError} for a device past the device count
 * @throws {CudaError} when the driver cannot create it
 *
 * @example A stream of your own
 * ```ts
 * import assert from "node:assert/strict";
 * import { createStream, deviceCount } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   using stream = createStream("cuda:0");
 *   assert.equal(stream.device, "cuda:0");
 * }
 * ```
 */
export function createStream(device: string): CudaStream {
  const index = parseCudaDevice(device);
  return makeStream(index, streamCreate(index), OWNED);
}

/**
 * The library's default compute stream of `device`: kernels launched
 * without a `stream` run on it. It is separate from the stream the library
 * copies on, so the next copy overlaps kernels on it. The same object on
 * every call; `dispose()` does nothing.
 *
 * @param device `"cuda"` or `"cuda:N"`
 * @returns the device's default compute stream
 * @throws {TypeError} for a malformed device or `"cpu"`
 * @throws {RangeError} for a device past the device count
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { defaultStream, deviceCount } from "@mtc/core";
 * if (deviceCount() > 0) assert.equal(defaultStream("cuda:0"), defaultStream("cuda"));
 * ```
 */
export function defaultStream(device: string): CudaStream {
  return defaultStreamOf(parseCudaDevice(device));
}

/** {@linkcode defaultStream} by device index (library-internal: no string per launch). */
export function defaultStreamOf(device: DeviceIndex): CudaStream {
  return defaults[device] ??= makeStream(device, libraryStream(device, "compute"), LIBRARY);
}

/** The library's copy stream of `device` (library-internal: never handed out). */
export function copyStream(device: DeviceIndex): CudaStream {
  return copies[device] ??= makeStream(device, libraryStream(device, "copy"), LIBRARY);
}
