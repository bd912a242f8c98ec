/**
 * `After`: what work can be ordered after on the GPU (a copy, a launch, or
 * everything queued on a stream so far), and the three places that order
 * after it: a stream (launches), the copy streams (`startCopy`), and the
 * reuse of a disposed tensor's memory (`dispose`, `disposeAll`).
 *
 * Every ordering is a wait queued on the GPU (`cuStreamWaitEvent`, or a
 * gate for a copy not queued yet: `gate.ts`); the CPU never waits. A stream
 * is waited for through one scratch event per device, recorded and waited
 * for in one call: a wait captures the record it follows when it is queued,
 * so the event is free again at once and never leaves the library.
 *
 * Note [Copy streams never wait for gates]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A copy not queued yet queues its transfers later on a library copy
 * stream. Were that copy stream made to wait for it, or for anything that
 * waits for its gate (a launch ordered after it, a stream that waited for
 * it), the transfers would queue behind that wait and never run: a GPU
 * deadlock. So an ordering of a copy stream (`startCopy({ after })`, the
 * reuse of disposed device memory) is deferred, on the CPU, while it could
 * depend on such a copy: until the copies it names are queued, and while
 * any gate is closed, until the copies behind every closed gate are. The
 * streams it names are marked at once (an event recorded on each), so the
 * deferred wait covers their work up to the call, no more. A deferred copy
 * is queued like a copy waiting for memory; deferred device memory is held
 * until its ordering is queued.
 *
 * @module
 */

import { eventCreate, eventRecordOn, streamFence, streamWaitEvent } from "../../ffi/native.ts";
import type { ArenaMemory } from "../arena_index.ts";
import {
  AsyncCopyHandle,
  gatedCopiesQueued,
  holdUntilCopySettled,
  type Releasable,
  whenCopyQueued,
} from "../copy_handle.ts";
import { CPU, type DeviceIndex } from "../device.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";
import type { Storage } from "../memory/storage.ts";
import { copyStream, CudaStream, describe, streamAddress, streamDevice } from "./stream.ts";
import { GpuWork, holdUntilDone } from "./work.ts";

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

const scratch: number[] = [];

/**
 * Checks `after` (one item, or a list where `list` allows it) for an
 * argument called `what`; returns the items.
 *
 * @throws {TypeError} for anything that is not an `After`, or a disposed stream
 */
export function checkAfter(after: unknown, what: string, list = false): After[] {
  const items = list && Array.isArray(after) ? after : [after];
  items.forEach((item, i) => {
    const name = items === after ? `${what}[${i}]` : what;
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
 * Makes `stream` (never a library copy stream with a copy not queued yet
 * among `items`: see the note) wait on the GPU for each of `items`; returns
 * at once.
 */
export function orderAfter(stream: CudaStream, items: readonly After[]): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (item instanceof CudaStream) {
      const signalDevice = streamDevice(item);
      const waiterDevice = streamDevice(stream);
      // The same stream (the legacy default stream, 0, is one per device).
      if (streamAddress(item) === streamAddress(stream) && signalDevice === waiterDevice) continue;
      streamFence({
        waiterDevice,
        waiter: streamAddress(stream),
        signalDevice,
        signaler: streamAddress(item),
        event: scratch[signalDevice] ??= eventCreate(signalDevice),
      });
    } else {
      item.enqueueWait(stream);
    }
  }
}

/** The work queued on a stream up to a point: an event recorded there (from the pool). */
interface Marker {
  readonly device: DeviceIndex;
  readonly event: number;
}

/**
 * The ordering of library copy streams after `after` items (see the note):
 * at once when nothing it names can depend on a copy not queued yet;
 * otherwise `blockers` settles once it can be queued, and the streams it
 * names were marked at construction.
 */
export class CopyStreamOrder {
  /** Settles once the ordering can be queued (`undefined`: now). */
  readonly blockers: Promise<void> | undefined;
  readonly #items: readonly (After | Marker)[];

  /** Checks nothing: `items` come from {@linkcode checkAfter}. */
  constructor(items: readonly After[]) {
    const waits: Promise<void>[] = [];
    let others = false;
    for (const item of items) {
      if (item instanceof AsyncCopyHandle) {
        const queued = whenCopyQueued(item);
        if (queued) waits.push(queued);
      } else {
        others = true;
      }
    }
    const gated = others ? gatedCopiesQueued() : undefined;
    if (gated) waits.push(gated);
    if (waits.length === 0) {
      this.#items = items;
      return;
    }
    this.blockers = waits.length === 1 ? waits[0] : Promise.all(waits).then(() => {});
    this.#items = items.map((item) => {
      if (!(item instanceof CudaStream)) return item;
      const device = streamDevice(item);
      const event = acquireEvent(device);
      try {
        eventRecordOn(device, streamAddress(item), event);
      } catch (error) {
        releaseEvent(device, event);
        throw error;
      }
      return { device, event };
    });
  }

  /**
   * Makes the copy stream of `device` wait on the GPU for the items; once
   * `blockers` settled.
   *
   * @throws the failure of a copy among the items, or a `CudaError`
   */
  apply(device: DeviceIndex): void {
    const waiter = copyStream(device);
    for (const item of this.#items) {
      if (
        item instanceof AsyncCopyHandle || item instanceof GpuWork || item instanceof CudaStream
      ) {
        orderAfter(waiter, [item]);
      } else {
        streamWaitEvent(device, streamAddress(waiter), item.event);
      }
    }
  }

  /** Gives the markers back (each wait captured its record when it was queued). */
  release(): void {
    for (const item of this.#items) {
      if (
        !(item instanceof AsyncCopyHandle || item instanceof GpuWork || item instanceof CudaStream)
      ) {
        releaseEvent(item.device, item.event);
      }
    }
  }
}

/**
 * The release of memory after `after`, for one `disposeAll` (or one
 * `dispose`): each device's copy stream is ordered after it once.
 */
export class OrderedRelease {
  readonly #items: readonly After[];
  readonly #ordered = new Set<DeviceIndex>();
  #copyOrder: CopyStreamOrder | undefined;
  /** Device memory held until a deferred ordering is queued. */
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

  /** A marker recorded now on `stream`, settled like a launch. */
  #markerOf(stream: CudaStream): GpuWork {
    const markers = this.#markers ??= new Map();
    let marker = markers.get(stream);
    if (marker === undefined) {
      const device = streamDevice(stream);
      const address = streamAddress(stream);
      const event = acquireEvent(device);
      try {
        eventRecordOn(device, address, event);
      } catch (error) {
        releaseEvent(device, event);
        throw error;
      }
      marker = new GpuWork(device, address, event, "a deferred release");
      markers.set(stream, marker);
    }
    return marker;
  }

  #orderDevice(storage: Storage, device: DeviceIndex): void {
    const order = this.#copyOrder ??= new CopyStreamOrder(this.#items);
    if (order.blockers === undefined) {
      if (this.#ordered.has(device)) return;
      order.apply(device);
      this.#ordered.add(device);
      return;
    }
    // Held until the ordering is queued (a microtask at the earliest, after
    // the caller's loop over its tensors).
    storage.retain();
    if (this.#deferred === undefined) {
      const deferred: { storage: Storage; device: DeviceIndex }[] = this.#deferred = [];
      order.blockers.then(() => {
        for (const { device } of deferred) {
          if (this.#ordered.has(device)) continue;
          this.#ordered.add(device);
          try {
            order.apply(device);
          } catch {
            // A copy it names failed, or the context broke: nothing of it
            // reads the memory anymore.
          }
        }
      }).finally(() => {
        order.release();
        for (const { storage } of deferred) storage.release();
      });
    }
    this.#deferred.push({ storage, device });
  }
}

/**
 * Orders a copy after `after` items (startCopy's option): the copy streams
 * of `devices`, which the copy queues work on, wait for them on the GPU.
 * Returns `undefined` once that is queued, or a Promise that settles once
 * it is (rejecting with the failure of a copy it names): the copy must be
 * queued only then (see the note).
 */
export function orderCopyAfter(
  after: readonly After[],
  devices: Iterable<DeviceIndex>,
): Promise<void> | undefined {
  const order = new CopyStreamOrder(after);
  if (order.blockers === undefined) {
    for (const device of devices) order.apply(device);
    return undefined;
  }
  const list = [...devices];
  return order.blockers.then(() => {
    for (const device of list) order.apply(device);
  }).finally(() => order.release());
}
