/**
 * `After`: what work can be ordered after on the GPU (a copy, a launch, or
 * everything queued on a stream so far), its check, and the ordering
 * itself: a stream (launches) or the copy streams (`startCopy`) made to
 * wait for it. The reuse of a disposed tensor's memory after it
 * (`dispose`, `disposeAll`) builds on these in gpu/ordered_release.ts.
 *
 * Every ordering is a wait queued on the GPU (`cuStreamWaitEvent`) for an
 * event already recorded; the CPU never waits. A stream is waited for
 * through one scratch event per device, recorded and waited for in one
 * call: a wait captures the record it follows when it is queued, so the
 * event is free again at once and never leaves the library.
 *
 * Work that is not queued yet (a copy still staging or waiting for memory,
 * a launch ordered after one, a stream whose last launch is such a launch)
 * has no event yet. What is ordered after it is queued once it is (on the
 * CPU: a promise, no thread waits; gpu/deferred_work.ts, "Work not queued
 * yet"): a launch, a copy (`startCopy({ after })`, queued as a copy waiting
 * for memory is), or the reuse of disposed device memory (held until then).
 *
 * @module
 */

import { eventCreate } from "../../ffi/events.ts";
import { streamFence } from "../../ffi/streams.ts";
import { AsyncCopyHandle, enqueueCopyWait, whenCopyQueued } from "../copy_handle.ts";
import type { DeviceIndex } from "../device.ts";
import { describe } from "./arguments.ts";
import { copyStream } from "./device_streams.ts";
import { CudaStream, streamAddress, streamDevice } from "./stream.ts";
import { streamMarkers } from "./stream_markers.ts";
import { streamTail } from "./stream_tail.ts";
import { enqueueWorkWait, GpuWork, whenWorkQueued } from "./work.ts";

/**
 * Work that other work can be ordered after, on the GPU: a copy's handle,
 * a launch's work, or a stream (everything queued on it so far).
 *
 * @example Order a copy after a copy, on the GPU
 * ```ts
 * import assert from "node:assert/strict";
 * import { type After, deviceCount, startCopy } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   const first = startCopy([new Float32Array(4)], "cuda:0");
 *   const after: After = first;
 *   const [x] = await first.get();
 *   const [back] = await startCopy([x], "cpu", { after }).get();
 *   assert.equal(back.byteLength, 16);
 *   x.dispose();
 * }
 * ```
 */
export type After = AsyncCopyHandle<unknown> | GpuWork | CudaStream;

const scratch: number[] = [];

/**
 * Checks `after` (one item, or a list where `list` allows it) for an
 * argument called `what`; returns the items.
 *
 * @throws {TypeError} for anything that is not an `After`, or a disposed stream
 */
export function checkAfter(after: unknown, what: string, list = false): After[] {
  const many = list && Array.isArray(after);
  // A copy of the list, holes read as undefined (and refused): forEach
  // skipped holes, which then reached the ordering as undefined items; and
  // what is used later is what was checked, whatever happens to the list.
  const items: unknown[] = many ? Array.from(after as unknown[]) : [after];
  items.forEach((item, i) => {
    const name = many ? `${what}[${i}]` : what;
    if (item instanceof CudaStream) {
      if (item.disposed) throw new TypeError(`Invalid ${name}: the stream was disposed`);
    } else if (!(item instanceof AsyncCopyHandle) && !(item instanceof GpuWork)) {
      throw new TypeError(
        `Invalid ${name}: expected an AsyncCopyHandle, a GpuWork or a CudaStream${
          list ? " (or an array of them)" : ""
        }, got ${describe(item)}`,
      );
    }
  });
  return items as After[];
}

/**
 * Makes `stream` wait on the GPU for each of `items`, all queued already
 * (see {@linkcode notQueuedYet}); returns at once.
 */
export function orderAfter(stream: CudaStream, items: readonly After[]): void {
  orderAfterOn(streamDevice(stream), streamAddress(stream), items);
}

/** {@linkcode orderAfter} for the stream at address `waiter` of `waiterDevice`. */
export function orderAfterOn(
  waiterDevice: DeviceIndex,
  waiter: number,
  items: readonly After[],
): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (item instanceof CudaStream) {
      const signalDevice = streamDevice(item);
      const signaler = streamAddress(item);
      // The same stream (the legacy default stream, 0, is one per device).
      if (signaler === waiter && signalDevice === waiterDevice) continue;
      streamFence({
        waiterDevice,
        waiter,
        signalDevice,
        signaler,
        event: scratch[signalDevice] ??= eventCreate(signalDevice),
      });
    } else if (item instanceof GpuWork) {
      enqueueWorkWait(item, waiterDevice, waiter);
    } else {
      enqueueCopyWait(item, waiterDevice, waiter);
    }
  }
}

/**
 * `undefined` when every item of `after` (and the last launch on `stream`
 * of `device`, where given) is queued on the GPU; else a Promise that
 * resolves once they are (or have failed: it never rejects).
 */
export function notQueuedYet(
  after: readonly After[] | undefined,
  device?: DeviceIndex,
  stream?: number,
): Promise<void> | undefined {
  let waits: Promise<void>[] | undefined;
  const add = (wait: Promise<void> | undefined) => {
    if (wait !== undefined) (waits ??= []).push(wait);
  };
  if (stream !== undefined) add(streamTail(device!, stream)?.queued);
  if (after !== undefined) {
    for (let i = 0; i < after.length; i++) {
      const item = after[i];
      if (item instanceof AsyncCopyHandle) {
        add(whenCopyQueued(item));
      } else if (item instanceof GpuWork) {
        add(whenWorkQueued(item));
      } else {
        add(streamTail(streamDevice(item), streamAddress(item))?.queued);
      }
    }
  }
  if (waits === undefined) return undefined;
  return waits.length === 1 ? waits[0] : Promise.all(waits).then(() => {});
}

/**
 * `after` for what is queued later, once its items are: each stream
 * replaced by what stands for its work now (stream_markers.ts). Asked later,
 * a stream could have been disposed (the ordering threw, failing the
 * launch or copy), and work queued on it after the call would have counted.
 */
export function capturedAfter(after: readonly After[]): readonly After[] {
  let captured: After[] | undefined;
  for (let i = 0; i < after.length; i++) {
    const item = after[i];
    if (item instanceof CudaStream) {
      captured ??= after.slice(0, i);
      captured.push(...streamMarkers(item, "an ordering after a stream"));
    } else if (captured !== undefined) {
      captured.push(item);
    }
  }
  return captured ?? after;
}

/**
 * Orders a copy after `after` items (startCopy's option): the copy streams
 * of `devices`, which the copy queues work on, wait for them on the GPU.
 * Returns `undefined` once that is queued, or, where some item is not
 * queued yet, a Promise that settles once the waits are (rejecting with
 * the failure of work it names): the copy must be queued only then.
 */
export function orderCopyAfter(
  after: readonly After[],
  devices: Iterable<DeviceIndex>,
): Promise<void> | undefined {
  const order = (device: DeviceIndex) => orderAfter(copyStream(device), after);
  const notQueued = notQueuedYet(after);
  if (notQueued === undefined) {
    for (const device of devices) order(device);
    return undefined;
  }
  const list = [...devices];
  const items = capturedAfter(after);
  return notQueued.then(() => list.forEach((device) => orderAfter(copyStream(device), items)));
}
