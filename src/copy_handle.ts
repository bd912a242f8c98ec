/**
 * `AsyncCopyHandle`: completion of one `startCopy`, surfaced as a Promise.
 *
 * Completion is one CUDA event per device the copy queued work on. `ready()`
 * queries them (a fast FFI call each). `get()` resolves at once when they
 * are complete; otherwise, after a microtask, it polls until the copy's
 * expected end (its bytes at {@linkcode ASSUMED_BYTES_PER_MICROSECOND} from
 * its start; only while no other copy is in flight) plus
 * {@linkcode SPIN_MICROSECONDS}, for at most {@linkcode MAX_SPIN_MICROSECONDS},
 * then waits on a Deno blocking-pool thread (a nonblocking FFI
 * `cuEventSynchronize`) so the event loop keeps running. A poll answers in
 * well under a microsecond; the off-thread wait's wake-up took 60–200 µs on
 * the GPU hosts (a 4 MB copy whose DMA takes 83 µs resolved after 276 µs
 * when only 30 µs were polled), so a copy about to end is polled for.
 *
 * A handle keeps everything its copy touches (inputs, staging blocks,
 * outputs) until it settles. Unsettled handles are also kept in a
 * process-wide set, so a dropped handle still settles (and returns its
 * staging memory) at the next `startCopy`, and its memory is never collected
 * while the GPU may still use it.
 *
 * @module
 */

import { eventStatus, eventSynchronizeOffThread } from "../ffi/events.ts";
import { cudaError } from "../ffi/shim_call.ts";
import { streamWaitEvent } from "../ffi/streams.ts";
import { checkStream, type CudaStream, streamAddress, streamDevice } from "./gpu/stream.ts";
import { releaseEvent } from "./memory/event_pool.ts";

/** How long `get()` polls past a copy's expected end before waiting off-thread. */
export const SPIN_MICROSECONDS = 30;

/** The longest `get()` polls (blocking the event loop) before waiting off-thread. */
export const MAX_SPIN_MICROSECONDS = 1000;

/** The transfer rate `get()` assumes to expect a copy's end: lower than any link's. */
export const ASSUMED_BYTES_PER_MICROSECOND = 20_000;

/** What a copy did (the contract's `CopyStats`). */
export interface CopyStats {
  /** Tensor leaves found. */
  tensors: number;
  /** Their total payload bytes. */
  bytes: number;
  /** Leaves that travelled inside packed chunks. */
  packedTensors: number;
  /** Packed chunks used (each payload <= maxPackedChunkBytes). */
  chunks: number;
  /** Transfer operations issued (one per chunk + one per unpacked tensor, or fewer). */
  copies: number;
}

/** A CUDA event and the device it belongs to. */
export interface DeviceEvent {
  /** Device index of the event. */
  device: number;
  /** The event handle. */
  event: number;
}

/** How a handle asks about its events: CUDA's, unless a test gives others. */
export interface EventOps {
  /** 0 when the event completed, -1 while pending, else a CUDA status. Never blocks. */
  status(device: number, event: number): number;
  /** Waits for the event off the main thread; 0 or a CUDA status. */
  wait(device: number, event: number): Promise<number>;
  /** Gives a completed event back to its pool. */
  release(device: number, event: number): void;
}

const CUDA_EVENTS: EventOps = {
  status: eventStatus,
  wait: eventSynchronizeOffThread,
  release: releaseEvent,
};

/** The work behind a handle (library-internal). */
export interface CopyJob<R> {
  /** The event operations to use (default: CUDA's). */
  eventOps?: EventOps;
  /** Events recorded after all of the copy's GPU work, one per device. */
  events: DeviceEvent[];
  /** Set while background staging runs; resolves once `events` are recorded. */
  submitted?: Promise<void>;
  /** Counters of the copy. */
  stats: CopyStats;
  /** Called once the events completed: releases staging, returns the result. */
  complete(): R;
  /** Called on failure: releases everything once the GPU is idle. */
  abort(error?: unknown): void;
  /** The result structure (`outputs()`), bound to its memory at once unless `waitsForMemory`. */
  outputs?: R;
  /**
   * Whether the copy waits for memory: its outputs are bound to memory once
   * it is queued (Note [Copies that wait for memory] in transfer/admission.ts).
   */
  waitsForMemory?: boolean;
}

/** Something held until a copy or a launch settles (a storage, an arena). */
export interface Releasable {
  /** Drops the hold. */
  release(): void;
}

/**
 * Other GPU work that holds memory until the CPU sees it done (kernel
 * launches, `gpu/work.ts`): settled along with the copies.
 */
export const otherWork: ((everyOne: boolean) => void)[] = [];

const inFlight = new Set<AsyncCopyHandle<unknown>>();

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

/**
 * Settles the in-flight handles whose copies have finished, oldest first,
 * stopping at the first one still running: copies on one stream finish in
 * order, so this costs one query per settled copy plus one, not one per
 * copy in flight (with 1000 in flight, asking all of them at every
 * `startCopy` took seconds). A later copy that finished earlier on another
 * device is settled by its own `ready()`/`get()`, or by a later call.
 * With `everyOne`, asks every handle (waiting for memory, process exit).
 */
export function reapFinished(everyOne = false): void {
  for (let i = 0; i < otherWork.length; i++) otherWork[i](everyOne);
  for (const handle of inFlight) {
    if (!handle.ready() && !everyOne) return;
  }
}

const PENDING = 0;
const DONE = 1;
const FAILED = 2;

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
    inFlight.add(this as AsyncCopyHandle<unknown>);
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
      this.#promise = this.#wait();
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

  async #wait(): Promise<R> {
    const job = this.#job!;
    // Polling starts after a microtask at least, so that get() returns at
    // once and the caller's code goes on (`Promise.all` over copies to two
    // devices starts the second before the first is polled for).
    await (job.submitted ? job.submitted.catch(() => {}) : undefined);
    if (this.#state === PENDING) {
      // Polling blocks the event loop, which other copies in flight need
      // (their staging goes on in promise continuations): past the expected
      // end only while this is the one copy in flight. (Two copies to two
      // devices started together measured 1.64x one device's rate instead
      // of 1.96x while each get() polled for its whole expected time.)
      // The expected end counts from the first poll rather than from the
      // start (a clock read per copy saved, ~120 ns): a copy not done by
      // then polls for at most its expected time more, within the cap.
      const now = performance.now();
      const expected = this.#stats.bytes / ASSUMED_BYTES_PER_MICROSECOND / 1000;
      const until = inFlight.size > 1 ? now : now + expected;
      const deadline = Math.min(
        until + SPIN_MICROSECONDS / 1000,
        now + MAX_SPIN_MICROSECONDS / 1000,
      );
      while (!this.ready() && performance.now() < deadline) { /* poll */ }
    }
    while (this.#state === PENDING) {
      const events = job.events;
      for (let i = 0; i < events.length; i++) {
        const status = await this.#events.wait(events[i].device, events[i].event);
        if (status !== 0 && this.#state === PENDING) {
          this.#fail(cudaError(status, "complete the copy"));
        }
      }
      this.ready();
    }
    if (this.#state === FAILED) throw this.#error;
    return this.#result as R;
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
    inFlight.delete(this as AsyncCopyHandle<unknown>);
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
    inFlight.delete(this as AsyncCopyHandle<unknown>);
    this.#error = error;
    this.#state = FAILED;
    job.abort(error);
    this.#settled();
  }
}
