/**
 * CUDA events: created, recorded on a library stream or any stream, asked
 * about without blocking, and waited for off the main thread. The pools of
 * src/memory/ lend them; the process-wide cache is ffi/process_cache.ts.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { eventStatus } from "./events.ts";
 * assert.equal(typeof eventStatus, "function"); // needs a GPU to ask a real event
 * ```
 *
 * @module
 */

import { CUDA_NOT_READY } from "./cuda_error.ts";
import { check, out, sym } from "./shim_call.ts";

/** Creates a CUDA event of `device`, without timing; returns its handle. */
export function eventCreate(device: number): number {
  check(sym().mtc_event_create(device, out), () => `create a CUDA event on cuda:${device}`);
  return out[0];
}

/** Records `event` on the library stream of `device`. */
export function eventRecord(device: number, event: number): void {
  check(
    sym().mtc_event_record(device, event),
    () => `record a CUDA event on cuda:${device}`,
  );
}

/**
 * Returns 0 when the event completed, -1 while pending, or the CUDA status
 * of a failure (never throws, so that `ready()` can call it).
 */
export function eventStatus(device: number, event: number): number {
  const status = sym().mtc_event_query(device, event);
  return status === CUDA_NOT_READY ? -1 : status;
}

/** Waits for `event` of `device` on a Deno blocking-pool thread; 0 or a CUDA status. */
export function eventSynchronizeOffThread(device: number, event: number): Promise<number> {
  return sym().mtc_event_synchronize_nonblocking(device, event);
}

/** Records `event` of `device` on `stream`. */
export function eventRecordOn(device: number, stream: number, event: number): void {
  check(
    sym().mtc_event_record_on(device, stream, event),
    () => `record a CUDA event on a stream of cuda:${device}`,
  );
}
