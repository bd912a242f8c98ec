/**
 * `AsyncCopyHandle`: completion of one `startCopy`, surfaced as a Promise.
 *
 * Completion is one CUDA event per device the copy queued work on. `ready()`
 * queries them (a fast FFI call each). `get()` resolves at once when they
 * are complete; otherwise it polls, then waits off the main thread
 * (`copy_wait.ts` says how long and why).
 *
 * A handle keeps everything its copy touches (inputs, staging blocks,
 * outputs) until it settles. Unsettled handles are also kept in a
 * process-wide set (`copies_in_flight.ts`), so a dropped handle still
 * settles (and returns its staging memory) at the next `startCopy`, and its
 * memory is never collected while the GPU may still use it.
 *
 * The job types, the in-flight set and the wait have files of their own;
 * this module re-exports the names its importers used before that split.
 *
 * @module
 */

import { eventStatus, eventSynchronizeOffThread } from "../ffi/events.ts";
import { cudaError } from "../ffi/shim_call.ts";
import { streamWaitEvent } from "../ffi/streams.ts";
import { inFlight } from "./copies_in_flight.ts";
import type { CopyJob, CopyStats, EventOps, Releasable } from "./copy_job.ts";
import { type CopyWaitHooks, waitForCopy } from "./copy_wait.ts";
import { checkStream, type CudaStream, streamAddress, streamDevice } from "./gpu/stream.ts";
import { releaseEvent } from "./memory/event_pool.ts";

const CUDA_EVENTS: EventOps = {
  status: eventStatus,
  wait: eventSynchronizeOffThread,
  release: releaseEvent,
};

// The constructor's key: only this module's createCopyHandle holds it.
const CONSTRUCT = Symbol("AsyncCopyHandle");

/** Makes the handle of a copy (library-internal: `startCopy` and tests). */
export function createCopyHandle<R>(job: CopyJob<R>): AsyncCopyHandle<R> {
  return new AsyncCopyHandle(job, CONSTRUCT);
}
let queuedOf: (handle: AsyncCopyHandle<unknown>) => Promise<void> | undefined;
let waitOf: (handle: AsyncCopyHandle<unknown>, device: number, stream: number) => void;

/**
 * `enqueueWait` for the stream at address `stream` of `device` (checked by
 * the caller, or one the library holds on to), for work queued already.
 */
export function enqueueCopyWait(
  handle: AsyncCopyHandle<unknown>,
  device: number,
  stream: number,
): void {
  waitOf(handle, device, stream);
}
let holdOf: (handle: AsyncCopyHandle<unknown>, held: Releasable) => boolean;

/**
 * `undefined` once `handle`'s copy is queued (or settled); until then, a
 * Promise that resolves when it is (or fails: it never rejects).
 */
export function whenCopyQueued(handle: AsyncCopyHandle<unknown>): Promise<void> | undefined {
  return queuedOf(handle);
}

/**
 * Holds `held` until `handle`'s copy settles; false (and nothing held) when
 * it already has.
 */
export function holdUntilCopySettled(handle: AsyncCopyHandle<unknown>, held: Releasable): boolean {
  return holdOf(handle, held);
}

const PENDING = 0;
const DONE = 1;
const FAILED = 2;

// What copy_wait.ts reads of a handle: made once, by the class.
let waitHooks: CopyWaitHooks;

/**
 * Handle of an asynchronous copy started by `startCopy`.
 *
 * @example Polling and awaiting
 * ```ts
 * import { startCopy } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const handle = startCopy({ ids: new Int32Array([1, 2, 3]) }, "cpu");
 * const result = await handle.get();
 * assert.equal(handle.ready(), true);
 * assert.equal(result.ids.numel, 3);
 * ```
 */
export class AsyncCopyHandle<R> {
  #job: CopyJob<R> | undefined;
  #state = PENDING;
  #submitted = false;
  /** Settles once the copy is queued or failed (only while it was not at first). */
  #queued: Promise<void> | undefined;
  #holds: Releasable[] | undefined;
  #result: R | undefined;
  #error: unknown;
  #promise: Promise<R> | undefined;
  readonly #stats: CopyStats;
  readonly #events: EventOps;

  /**
   * Created by `startCopy` only (the package exports this class as a type;
   * `handle.constructor` from user code throws before anything is
   * registered, since a half-made handle in the in-flight list would break
   * every later copy).
   *
   * @ignore
   */
  constructor(job: CopyJob<R>, key?: symbol) {
    if (key !== CONSTRUCT) {
      throw new TypeError("Cannot construct an AsyncCopyHandle directly: startCopy() makes them");
    }
    this.#job = job;
    this.#stats = job.stats;
    this.#events = job.eventOps ?? CUDA_EVENTS;
    if (job.submitted) {
      this.#queued = job.submitted.then(
        () => {
          this.#submitted = true;
        },
        (error) => this.#fail(error),
      );
    } else {
      this.#submitted = true;
    }
    inFlight.add(this);
    this.ready();
  }

  /**
   * Whether the copy has completed or failed. Never blocks.
   *
   * @returns true once `get()` would settle without waiting
   */
  ready(): boolean {
    if (this.#state !== PENDING) return true;
    if (!this.#submitted) return false;
    const events = this.#job!.events;
    for (let i = 0; i < events.length; i++) {
      const status = this.#events.status(events[i].device, events[i].event);
      if (status === -1) return false;
      if (status !== 0) {
        this.#fail(cudaError(status, "complete the copy"));
        return true;
      }
    }
    this.#succeed();
    return true;
  }

  /**
   * The copied structure, once the copy completed. Returns at once; a
   * microtask later it polls the copy's completion until shortly after its
   * expected end (at most 1 ms, and 30 µs while other copies are in
   * flight), then waits off the main thread, so that a copy about to
   * finish resolves without the 60–200 µs wake-up of an off-thread wait.
   *
   * @returns a Promise of the input's structure with every tensor on the
   * target device; the same Promise on every call
   * @throws rejects with the copy's failure (a `CudaError` naming the CUDA error)
   */
  get(): Promise<R> {
    if (this.#promise) return this.#promise;
    if (this.ready()) {
      this.#promise = this.#state === DONE
        ? Promise.resolve(this.#result as R)
        : Promise.reject(this.#error);
    } else {
      this.#promise = waitForCopy(this, this.#job!, this.#events, waitHooks);
    }
    return this.#promise;
  }

  /**
   * Makes `stream` wait on the GPU for this copy; returns at once (the CPU
   * never waits). Nothing to do once the copy is done. Kernels that read
   * the copy's outputs on `stream` (or `launch({ after: handle })`) then see
   * the copied bytes.
   *
   * A copy not queued yet (tensors of 1 MiB and more still staging in the
   * background, or a copy waiting for memory) cannot be waited for on the
   * GPU: there is no event to wait for yet, and a GPU wait for work not yet
   * queued deadlocks where streams share a hardware queue. Pass the handle
   * as `after` to `launch`, `startCopy` or `dispose` instead (they are
   * queued once the copy is), or `await queued()` first.
   *
   * @param stream the stream whose later work must run after the copy
   * @throws {TypeError} for a value that is no live `CudaStream`
   * @throws {Error} for a copy not queued yet (see above)
   * @throws {CudaError} or the copy's own error when the copy failed
   */
  enqueueWait(stream: CudaStream): void {
    checkStream(stream, "stream");
    this.#enqueueWait(streamDevice(stream), streamAddress(stream));
  }

  #enqueueWait(device: number, stream: number): void {
    if (this.ready()) {
      if (this.#state === FAILED) throw this.#error;
      return;
    }
    if (!this.#submitted) {
      throw new Error(
        "Cannot make a stream wait on the GPU for a copy that is not queued yet (tensors of 1 MiB and more still staging in the background, or a copy waiting for memory): pass the handle as `after` to launch, startCopy or dispose, which are queued once the copy is, or await handle.queued() first",
      );
    }
    const events = this.#job!.events;
    for (let i = 0; i < events.length; i++) streamWaitEvent(device, stream, events[i].event);
  }

  /**
   * Resolves once all of the copy's GPU work is queued (at once for most
   * copies; later for tensors staged in the background or a copy waiting for
   * memory): from then on `enqueueWait` works. `after` needs no such wait,
   * and `outputs()` answers at once but for a copy waiting for memory.
   *
   * @returns a Promise that rejects with the copy's failure
   */
  queued(): Promise<void> {
    const submitted = this.#job?.submitted;
    if (this.#submitted || submitted === undefined) {
      return this.#state === FAILED ? Promise.reject(this.#error) : Promise.resolve();
    }
    return submitted.then(() => {});
  }

  /**
   * The copied structure at once, before the copy completes: for GPU work
   * ordered after this copy (`launch({ after: handle, args: [...] })`),
   * so that a step needs no await between copy and kernel. Its tensors'
   * bytes are written on the library's copy stream: read them only from
   * work ordered after the handle, or after `get()` resolves.
   *
   * @returns the same structure `get()` resolves with
   * @throws {Error} while the copy waits for memory under the limits, or
   * for a copy not queued yet that it is ordered after (its outputs have no
   * memory yet: `await queued()` first), or the copy's error when it failed
   */
  outputs(): R {
    if (this.#state === DONE) return this.#result as R;
    if (this.#state === FAILED) throw this.#error;
    const job = this.#job!;
    if ((!this.#submitted && job.waitsForMemory) || job.outputs === undefined) {
      throw new Error(
        "Cannot hand out the outputs of a copy that is not queued yet for want of memory, or of a copy it is ordered after (they have no memory yet): await handle.queued() first",
      );
    }
    return job.outputs;
  }

  /**
   * What the copy did (tensors, bytes, packed tensors, chunks, transfers).
   *
   * @returns a fresh snapshot of the counters
   */
  stats(): CopyStats {
    return { ...this.#stats };
  }

  /** Shows the state and size in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    const state = ["pending", "done", "failed"][this.#state];
    return `AsyncCopyHandle(${state}, ${this.#stats.tensors} tensors, ${this.#stats.bytes} bytes)`;
  }

  static {
    queuedOf = (handle) => {
      if (handle.#state !== PENDING || handle.#submitted) return undefined;
      return handle.#queued;
    };
    waitOf = (handle, device, stream) => handle.#enqueueWait(device, stream);
    holdOf = (handle, held) => {
      if (handle.#state !== PENDING) return false;
      (handle.#holds ??= []).push(held);
      return true;
    };
    waitHooks = {
      pending: (copy) => (copy as AsyncCopyHandle<unknown>).#state === PENDING,
      fail: (copy, status) =>
        (copy as AsyncCopyHandle<unknown>).#fail(cudaError(status, "complete the copy")),
      outcome: (copy) => {
        const handle = copy as AsyncCopyHandle<unknown>;
        if (handle.#state === FAILED) throw handle.#error;
        return handle.#result;
      },
    };
  }

  /** Once the copy has settled: what others asked it to hold goes back. */
  #settled(): void {
    const holds = this.#holds;
    this.#holds = undefined;
    if (holds) { for (const held of holds) held.release(); }
  }

  #succeed(): void {
    const job = this.#job!;
    this.#job = undefined;
    inFlight.delete(this);
    try {
      this.#result = job.complete();
      this.#state = DONE;
    } catch (error) {
      this.#error = error;
      this.#state = FAILED;
    }
    for (const { device, event } of job.events) this.#events.release(device, event);
    this.#settled();
  }

  #fail(error: unknown): void {
    if (this.#state !== PENDING) return;
    const job = this.#job!;
    this.#job = undefined;
    inFlight.delete(this);
    this.#error = error;
    this.#state = FAILED;
    job.abort(error);
    this.#settled();
  }
}
