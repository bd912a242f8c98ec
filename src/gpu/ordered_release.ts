/**
 * `OrderedRelease`: the reuse of a disposed tensor's memory ordered after
 * work that may still read it (`dispose({ after })`, `disposeAll(…, {
 * after })`), without a CPU wait: device memory is reused only by work on
 * its device's copy stream, which is made to wait for the work on the GPU;
 * host memory is reused by the CPU, so it is held until the work
 * completes.
 *
 * Its own file, above gpu/after.ts: it is the one user of the ordering
 * that holds memory (storages, arenas, markers on streams), and the
 * tensor's `dispose` is its only caller.
 *
 * @module
 */

import type { ArenaMemory } from "../arena_index.ts";
import { AsyncCopyHandle, holdUntilCopySettled } from "../copy_handle.ts";
import type { Releasable } from "../copy_job.ts";
import { CPU, type DeviceIndex } from "../device.ts";
import type { Storage } from "../memory/storage.ts";
import { shown } from "../shown.ts";
import { type After, capturedAfter, checkAfter, notQueuedYet, orderAfter } from "./after.ts";
import { copyStream } from "./device_streams.ts";
import type { CudaStream } from "./stream.ts";
import { streamMarkers } from "./stream_markers.ts";
import { GpuWork, holdUntilDone } from "./work.ts";

/**
 * Options of `Tensor.dispose` and `disposeAll`.
 *
 * @example Free a tensor's memory once a stream of yours is past it
 * ```ts
 * import assert from "node:assert/strict";
 * import { createStream, deviceCount, type DisposeOptions, startCopy } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   using stream = createStream("cuda:0");
 *   const [x] = await startCopy([new Float32Array(4)], "cuda:0").get();
 *   const options: DisposeOptions = { after: stream }; // no CPU wait
 *   x.dispose(options);
 *   assert.ok(x.disposed);
 * }
 * ```
 */
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
  #markers: Map<CudaStream, GpuWork[]> | undefined;

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
      if (item instanceof AsyncCopyHandle) {
        held.take();
        if (!holdUntilCopySettled(item, held)) held.release();
        continue;
      }
      // Found before a hold is taken: recording a marker may fail.
      const works = item instanceof GpuWork ? [item] : this.#markersOf(item);
      for (const work of works) {
        held.take();
        if (!holdUntilDone(work, held)) held.release();
      }
    }
  }

  /**
   * What stands for everything on `stream` so far (stream_markers.ts), once
   * per stream: the stream's last launch alone, where it was not queued
   * yet, stood for it, and where that launch failed the memory went back
   * while the work queued before it still read it.
   */
  #markersOf(stream: CudaStream): GpuWork[] {
    const markers = this.#markers ??= new Map();
    let found = markers.get(stream);
    if (found === undefined) {
      found = streamMarkers(stream, "a deferred release");
      markers.set(stream, found);
    }
    return found;
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
    // the caller's loop over its tensors), after the streams' work as it is
    // now (a stream may be disposed meanwhile).
    storage.retain();
    if (this.#deferred === undefined) {
      const deferred: { storage: Storage; device: DeviceIndex }[] = this.#deferred = [];
      const items = capturedAfter(this.#items);
      notQueued.then(() => {
        for (const { device } of deferred) {
          if (this.#ordered.has(device)) continue;
          this.#ordered.add(device);
          this.#orderCopyStream(device, items);
        }
      }).finally(() => {
        for (const { storage } of deferred) storage.release();
      });
    }
    this.#deferred.push({ storage, device });
  }

  /** Makes the copy stream of `device` wait for each item (all queued now). */
  #orderCopyStream(device: DeviceIndex, items: readonly After[] = this.#items): void {
    const stream = copyStream(device);
    for (const item of items) {
      try {
        orderAfter(stream, [item]);
      } catch {
        // The work failed, or the context broke: none of it reads the memory
        // anymore (a failed launch or copy never ran, or ran to its fault).
      }
    }
  }
}
