/**
 * `After`: what work can be ordered after on the GPU (a copy, a launch, or
 * everything queued on a stream so far), and the three places that order
 * after it: a stream (launches), the copy streams (`startCopy`), and the
 * reuse of a disposed tensor's memory (`dispose`, `disposeAll`).
 *
 * Every ordering is a wait queued on the GPU (`cuStreamWaitEvent`); the CPU
 * never waits. A stream is waited for through one scratch event per device,
 * recorded and waited for in one call: a wait captures the record it
 * follows when it is queued, so the event is free again at once and never
 * leaves the library.
 *
 * @module
 */

import { eventCreate, eventRecordOn, streamFence } from "../../ffi/native.ts";
import { AsyncCopyHandle } from "../copy_handle.ts";
import { CPU, type DeviceIndex } from "../device.ts";
import { acquireEvent } from "../memory/event_pool.ts";
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

/** Makes `stream` wait on the GPU for each of `items`; returns at once. */
export function orderAfter(stream: CudaStream, items: readonly After[]): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (item instanceof CudaStream) {
      if (item === stream || streamAddress(item) === streamAddress(stream)) continue;
      const signalDevice = streamDevice(item);
      streamFence({
        waiterDevice: streamDevice(stream),
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

/**
 * The release of memory after `after`, for one `disposeAll` (or one
 * `dispose`): each device's copy stream is ordered after it once.
 */
export class OrderedRelease {
  readonly #items: readonly After[];
  readonly #ordered = new Set<DeviceIndex>();

  /** Checks `after` (the `after` option of `what`). */
  constructor(after: unknown, what: string) {
    this.#items = checkAfter(after, what);
  }

  /**
   * Orders the reuse of `storage` (of a tensor on `device`) after the work:
   * device memory is reused only by work on its device's copy stream, which
   * now waits for it on the GPU. Pinned host memory is reused by the CPU, so
   * it is held until a marker recorded after the work completes.
   */
  order(storage: Storage | undefined, device: DeviceIndex): void {
    if (storage === undefined) return;
    if (device !== CPU) {
      this.#orderCopyStream(device);
      return;
    }
    for (const item of this.#items) {
      if (item instanceof GpuWork) {
        holdUntilDone(item, storage);
      } else if (item instanceof CudaStream) {
        // A marker recorded on the stream, settled like a launch.
        const marker = streamDevice(item);
        const event = acquireEvent(marker);
        eventRecordOn(marker, streamAddress(item), event);
        storage.retain();
        new GpuWork(marker, event, "a deferred release", [storage]);
      }
      // A copy holds its inputs' and outputs' memory until it settles.
    }
  }

  #orderCopyStream(device: DeviceIndex): void {
    if (this.#ordered.has(device)) return;
    orderAfter(copyStream(device), this.#items);
    this.#ordered.add(device);
  }
}

/**
 * Orders a copy after `after` (startCopy's option): the copy streams of
 * every device the copy queues work on wait for it on the GPU.
 */
export function orderCopyAfter(after: readonly After[], devices: Iterable<DeviceIndex>): void {
  for (const device of devices) orderAfter(copyStream(device), after);
}
