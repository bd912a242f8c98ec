/**
 * The tail of a stream: its last launch that is not queued yet on the GPU
 * (gpu/work.ts, Note [Work not queued yet]), and when it is. A stream's
 * `synchronize()` and `dispose()`, and work ordered after the stream, wait
 * for its tail on the CPU, so that the stream's order holds.
 *
 * The registry knows the tail's work only by identity: it sits below both
 * `CudaStream` (which asks for the tail) and `GpuWork` (which sets it), so
 * neither file imports the other for it and the two stay out of a cycle.
 * `tailWork` in gpu/work.ts gives the work back as a `GpuWork`.
 *
 * @module
 */

import type { DeviceIndex } from "../device.ts";

/**
 * The last launch on a stream that is not queued yet, and when it is.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { StreamTail } from "./stream_tail.ts";
 * const tail: StreamTail = { work: {}, queued: Promise.resolve() };
 * await tail.queued;
 * assert.equal(typeof tail.work, "object");
 * ```
 */
export interface StreamTail {
  /** The launch (a `GpuWork`, which only gpu/work.ts makes tails of). */
  readonly work: object;
  /** Resolves once it is queued, or has failed (never rejects). */
  readonly queued: Promise<void>;
}

const tails: Map<number, StreamTail>[] = [];

/**
 * The last launch not queued yet on the stream at address `stream` of
 * `device`, if any.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { streamTail } from "./stream_tail.ts";
 * assert.equal(streamTail(0, 0x1234), undefined); // no launch waits there
 * ```
 */
export function streamTail(device: DeviceIndex, stream: number): StreamTail | undefined {
  return tails[device]?.get(stream);
}

/**
 * Makes `tail` the last launch not queued yet on `stream` of `device`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { clearStreamTail, setStreamTail, streamTail } from "./stream_tail.ts";
 * const tail = { work: {}, queued: Promise.resolve() };
 * setStreamTail(0, 0x5678, tail);
 * assert.equal(streamTail(0, 0x5678), tail);
 * clearStreamTail(0, 0x5678, tail.work);
 * ```
 */
export function setStreamTail(device: DeviceIndex, stream: number, tail: StreamTail): void {
  (tails[device] ??= new Map()).set(stream, tail);
}

/**
 * Forgets `work` as the tail of `stream` of `device` (it is queued, or
 * failed); a later launch that became the tail meanwhile stays.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { clearStreamTail, setStreamTail, streamTail } from "./stream_tail.ts";
 * const first = {};
 * const second = { work: {}, queued: Promise.resolve() };
 * setStreamTail(0, 0x9abc, second);
 * clearStreamTail(0, 0x9abc, first); // not the tail: nothing changes
 * assert.equal(streamTail(0, 0x9abc), second);
 * clearStreamTail(0, 0x9abc, second.work);
 * assert.equal(streamTail(0, 0x9abc), undefined);
 * ```
 */
export function clearStreamTail(device: DeviceIndex, stream: number, work: object): void {
  if (tails[device]?.get(stream)?.work === work) tails[device].delete(stream);
}
