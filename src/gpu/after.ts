/**
 * `After`: what work can be ordered after on the GPU (a copy, a launch, or
 * everything queued on a stream so far), and the three places that order
 * after it: a stream (launches), the copy streams (`startCopy`), and the
 * reuse of a disposed tensor's memory (`dispose`, `disposeAll`).
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
 * CPU: a promise, no thread waits; gpu/work.ts, "Work not queued yet"): a
 * launch, a copy (`startCopy({ after })`, queued as a copy waiting for
 * memory is), or the reuse of disposed device memory (held until then).
 *
 * @module
 */

import { shown } from "../shown.ts";
import { eventCreate, eventRecordOn } from "../../ffi/events.ts";
import { streamFence } from "../../ffi/streams.ts";
import type { ArenaMemory } from "../arena_index.ts";
import {
  AsyncCopyHandle,
  enqueueCopyWait,
  holdUntilCopySettled,
  type Releasable,
  whenCopyQueued,
} from "../copy_handle.ts";
import { CPU, type DeviceIndex } from "../device.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";
import type { Storage } from "../memory/storage.ts";
import { copyStream, CudaStream, describe, streamAddress, streamDevice } from "./stream.ts";
import { streamTail } from "./stream_tail.ts";
import {
  enqueueWorkWait,
  GpuWork,
  holdUntilDone,
  makeWork,
  tailWork,
  whenWorkQueued,
} from "./work.ts";

/** Work that other work can be ordered after, on the GPU. */
export type After = AsyncCopyHandle<unknown> | GpuWork | CudaStream;

/** Options of `Tensor.dispose` and `disposeAll`. */
export interface DisposeOptions {
  /**
   * Work that still reads the memory (a launch, a copy, or everything
   * queued on a stream so far): the library reuses the memory only after it,
   * ordered on the GPU, so the CPU does not wait. Needed when your own code
   * reads a tensor through its `ptr` on a stream of yours; kernels launched
   * through `Kernel.launch` hold their tensor arguments themselves.
   */
  after?: After;
}

/**
 * The `after` of a dispose call's options: an own property only (an
 * enumerable `after` on `Object.prototype` is no option), undefined when
 * there is none.
 *
 * @throws {TypeError} for options that are neither undefined nor an object
 */
export function afterOption(options: unknown): unknown {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`Invalid options ${shown(options)}: expected an object`);
  }
  return Object.hasOwn(options, "after") ? (options as { after?: unknown }).after : undefined;
}

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
 * The release of memory after `after`, for one `disposeAll` (or one
 * `dispose`): each device's copy stream is ordered after it once.
 */
export class OrderedRelease {
  readonly #items: readonly After[];
  readonly #ordered = new Set<DeviceIndex>();
  /** Settles once the items are queued (`undefined`: they are); asked once. */
  #notQueued: Promise<void> | undefined | null = null;
  /** Device memory held until its ordering can be queued. */
  #deferred: { storage: Storage; device: DeviceIndex }[] | undefined;
  /** One marker per stream item, for host memory. */
  #markers: Map<CudaStream, GpuWork> | undefined;

  /** Checks `after` (the `after` option of `what`). */
  constructor(after: unknown, what: string) {
    this.#items = checkAfter(after, what);
  }

  /**
   * Orders the reuse of a disposed tensor's memory (`storage` of a tensor
   * on `device`, or the host `arena` its data lies in) after the work:
   * device memory is reused only by work on its device's copy stream, which
   * now waits for it on the GPU. Host memory (pinned blocks, arenas) is
   * reused by the CPU, so it is held until the work completes.
   */
  order(storage: Storage | undefined, device: DeviceIndex, arena?: ArenaMemory): void {
    if (device !== CPU) {
      if (storage !== undefined) this.#orderDevice(storage, device);
      return;
    }
    let held: Releasable & { take(): void };
    if (storage !== undefined) {
      held = { take: () => storage.retain(), release: () => storage.release() };
    } else if (arena !== undefined) {
      held = { take: () => arena.hold(), release: () => arena.release() };
    } else {
      return; // ordinary memory: the garbage collector's, never reused under the GPU
    }
    for (const item of this.#items) {
      held.take();
      const kept = item instanceof AsyncCopyHandle
        ? holdUntilCopySettled(item, held)
        : holdUntilDone(item instanceof GpuWork ? item : this.#markerOf(item), held);
      if (!kept) held.release();
    }
  }

  /**
   * A marker recorded now on `stream`, settled like a launch; or the
   * stream's last launch, when that is not queued yet.
   */
  #markerOf(stream: CudaStream): GpuWork {
    const markers = this.#markers ??= new Map();
    let marker = markers.get(stream);
    if (marker === undefined) {
      const device = streamDevice(stream);
      const address = streamAddress(stream);
      const tail = tailWork(device, address);
      if (tail) {
        markers.set(stream, tail);
        return tail;
      }
      const event = acquireEvent(device);
      try {
        eventRecordOn(device, address, event);
      } catch (error) {
        releaseEvent(device, event);
        throw error;
      }
      marker = makeWork(device, address, event, "a deferred release");
      markers.set(stream, marker);
    }
    return marker;
  }

  #orderDevice(storage: Storage, device: DeviceIndex): void {
    if (this.#notQueued === null) this.#notQueued = notQueuedYet(this.#items);
    const notQueued = this.#notQueued;
    if (notQueued === undefined) {
      if (this.#ordered.has(device)) return;
      this.#orderCopyStream(device);
      this.#ordered.add(device);
      return;
    }
    // Held until the ordering is queued (a microtask at the earliest, after
    // the caller's loop over its tensors).
    storage.retain();
    if (this.#deferred === undefined) {
      const deferred: { storage: Storage; device: DeviceIndex }[] = this.#deferred = [];
      notQueued.then(() => {
        for (const { device } of deferred) {
          if (this.#ordered.has(device)) continue;
          this.#ordered.add(device);
          this.#orderCopyStream(device);
        }
      }).finally(() => {
        for (const { storage } of deferred) storage.release();
      });
    }
    this.#deferred.push({ storage, device });
  }

  /** Makes the copy stream of `device` wait for each item (all queued now). */
  #orderCopyStream(device: DeviceIndex): void {
    const stream = copyStream(device);
    for (const item of this.#items) {
      try {
        orderAfter(stream, [item]);
      } catch {
        // The work failed, or the context broke: none of it reads the memory
        // anymore (a failed launch or copy never ran, or ran to its fault).
      }
    }
  }
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
  return notQueued.then(() => list.forEach(order));
}
