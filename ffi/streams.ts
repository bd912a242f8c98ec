/**
 * CUDA streams: the library's two streams per device (copy and default
 * compute), streams users create or wrap, and the waits that order one
 * stream after another on the GPU without a CPU wait.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { streamStatus } from "./streams.ts";
 * assert.equal(typeof streamStatus, "function"); // needs a GPU to ask a real stream
 * ```
 *
 * @module
 */

import { CUDA_NOT_READY } from "./cuda_error.ts";
import { check, out, sym } from "./shim_call.ts";

/** Waits for all work queued on the library stream of `device`. */
export function streamSynchronize(device: number): void {
  check(
    sym().mtc_stream_synchronize(device),
    () => `synchronize the stream of cuda:${device}`,
  );
}

/** Which library stream of a device: the copy stream or the default compute stream. */
export type LibraryStream = "copy" | "compute";

/** The handle of a library stream of `device` (the compute stream is created on first use). */
export function libraryStream(device: number, which: LibraryStream): number {
  check(
    sym().mtc_stream_library(device, which === "copy" ? 0 : 1, out),
    () => `create the ${which} stream of cuda:${device}`,
  );
  return out[0];
}

/** Creates a non-blocking stream of `device`; returns its handle. */
export function streamCreate(device: number): number {
  check(sym().mtc_stream_create(device, out), () => `create a CUDA stream on cuda:${device}`);
  return out[0];
}

/** Destroys a stream from {@linkcode streamCreate} (its queued work still completes). */
export function streamDestroy(device: number, stream: number): void {
  check(sym().mtc_stream_destroy(device, stream), () => `destroy a CUDA stream of cuda:${device}`);
}

/**
 * 0 when `stream` belongs to the primary context of `device`,
 * `MTC_E_WRONG_DEVICE` (ffi/cuda_error.ts) when it belongs to another, else the
 * driver's status for it (never throws).
 */
export function streamCheck(device: number, stream: number): number {
  return sym().mtc_stream_check(device, stream);
}

/** 0 when `stream` is idle, -1 while it has work pending, else a CUDA status (never throws). */
export function streamStatus(device: number, stream: number): number {
  const status = sym().mtc_stream_query(device, stream);
  return status === CUDA_NOT_READY ? -1 : status;
}

/** Waits for `stream` on a Deno blocking-pool thread; 0 or a CUDA status. */
export function streamWaitIdleOffThread(device: number, stream: number): Promise<number> {
  return sym().mtc_stream_wait_idle_nonblocking(device, stream);
}

/** Two streams and a scratch event: the waiter waits for the signaler's work so far. */
export interface StreamFence {
  waiterDevice: number;
  waiter: number;
  signalDevice: number;
  signaler: number;
  /** An event of `signalDevice`, free again as soon as this returns. */
  event: number;
}

/** Makes `waiter` wait on the GPU for the work queued on `signaler` so far; returns at once. */
export function streamFence(
  { waiterDevice, waiter, signalDevice, signaler, event }: StreamFence,
): void {
  check(
    sym().mtc_stream_fence(waiterDevice, waiter, signalDevice, signaler, event),
    () => `order a stream of cuda:${waiterDevice} after a stream of cuda:${signalDevice}`,
  );
}

/** Makes `stream` of `device` wait on the GPU for the latest record of `event`; returns at once. */
export function streamWaitEvent(device: number, stream: number, event: number): void {
  check(
    sym().mtc_stream_wait_event(device, stream, event),
    () => `make a stream of cuda:${device} wait for an event`,
  );
}
