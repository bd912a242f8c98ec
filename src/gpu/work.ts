/**
 * `GpuWork`: work queued on a stream (a kernel launch), that other work can
 * be ordered after on the GPU, and that holds what it uses until it is done.
 *
 * Note [Holds of GPU work]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * A launch takes one more hold on the storage of every tensor argument, so
 * that a `dispose()` meanwhile only drops the tensor's own hold: the block
 * goes back to its pool when the work's hold is released, once the CPU has
 * seen the work's event complete (never a use-after-free, whatever the
 * stream). The event comes from the library's pool and is never handed out:
 * `enqueueWait` queues a wait for it, which captures its record at once.
 * Works in flight are settled at each launch and each `startCopy`
 * (gpu/work_queues.ts), so a dropped work still gives its holds back.
 * A work may exist before it is queued (gpu/deferred_work.ts).
 *
 * @module
 */

import { streamWaitEvent } from "../../ffi/streams.ts";
import type { Releasable } from "../copy_job.ts";
import { otherWork } from "../copies_in_flight.ts";
import type { DeviceIndex } from "../device.ts";
import { checkStream, type CudaStream, streamAddress, streamDevice } from "./stream.ts";
import { StreamQueues } from "./work_queues.ts";
import { FAILED, WorkState } from "./work_state.ts";

/** The works in flight of the isolate, settled by {@linkcode reapWork}. */
const inFlight = new StreamQueues<GpuWork>();
let stateOf: (work: GpuWork) => WorkState;
let queuedOn: (work: GpuWork) => void;
let waitOf: (work: GpuWork, device: number, stream: number) => void;

/**
 * `enqueueWait` for the stream at address `stream` of `device` (checked by
 * the caller, or one the library holds on to), for work queued already.
 */
export function enqueueWorkWait(work: GpuWork, device: number, stream: number): void {
  waitOf(work, device, stream);
}

/**
 * `undefined` once `work` is queued on the GPU (or has failed); until then,
 * a Promise that resolves when it is, or fails (it never rejects).
 */
export function whenWorkQueued(work: GpuWork): Promise<void> | undefined {
  return stateOf(work).whenQueued();
}

/**
 * Queues `work`, made not queued yet: `event` was recorded after it
 * (gpu/deferred_work.ts).
 */
export function issueWork(work: GpuWork, event: number): void {
  queuedOn(work);
  stateOf(work).issue(event);
}

/** Fails `work`, made not queued yet, with `error`: it will never be queued. */
export function failWorkIssue(work: GpuWork, error: unknown): void {
  stateOf(work).fail(error);
}

/**
 * Work on the stream at address `stream` of `device` that failed with
 * `error` before it could be queued (a launch ordered after work that had
 * failed already): settled, and its `done()` rejects with `error`, as when
 * that work fails a moment later.
 */
export function failedWork(
  device: DeviceIndex,
  stream: number,
  what: string,
  error: unknown,
): GpuWork {
  const work = makeWork(device, stream, 0, what);
  failWorkIssue(work, error);
  return work;
}

// Set only while makeWork constructs: users cannot construct GpuWork.
let constructing = false;
let construct: (...args: Parameters<typeof makeWork>) => GpuWork;

/**
 * Library-internal: work queued on `stream` (an address) of `device`,
 * whose completion `event` (of `device`, from the pool) was recorded after
 * it (0: not queued yet, see gpu/deferred_work.ts); `holds` (already
 * taken) are released and `onSettle` called once it completes or fails.
 */
export function makeWork(
  device: DeviceIndex,
  stream: number,
  event: number,
  what: string,
  holds?: Releasable[],
  onSettle?: () => void,
): GpuWork {
  constructing = true;
  try {
    return construct(device, stream, event, what, holds, onSettle);
  } finally {
    constructing = false;
  }
}

/**
 * Holds `held` until `work` settles; false (and nothing held) when it
 * already has. The caller has taken the hold (a retain) that this releases.
 */
export function holdUntilDone(work: GpuWork, held: Releasable): boolean {
  return stateOf(work).hold(held);
}

/**
 * Settles the works in flight whose events completed: on each stream,
 * oldest first, up to the first one still running (`everyOne`: asks them
 * all).
 */
export function reapWork(everyOne = false): void {
  inFlight.reap(everyOne);
}
otherWork.push(reapWork);

/**
 * Work queued on a CUDA stream, such as a kernel launch: poll it, await it,
 * or order other work after it on the GPU (`enqueueWait`, or `after` in
 * `launch`, `startCopy` and `dispose`), without a CPU wait.
 *
 * @example Await a launch, or order a copy after it
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount, loadModule, startCopy } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   const module = await loadModule(`.version 7.0
 * .target sm_75
 * .address_size 64
 * .visible .entry fill_u32(.param .u64 dst, .param .u32 value) {
 *   .reg .b32 %r<3>; .reg .b64 %rd<4>;
 *   ld.param.u64 %rd1, [dst]; ld.param.u32 %r1, [value];
 *   cvta.to.global.u64 %rd2, %rd1; mov.u32 %r2, %tid.x;
 *   mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
 *   st.global.u32 [%rd2], %r1; ret;
 * }`);
 *   const [x] = await startCopy([new Uint32Array(2)], "cuda:0").get();
 *   const work = module.kernel("fill_u32", ["ptr", "u32"])
 *     .launch({ grid: 1, block: 2, args: [x, 5] });
 *   const [back] = await startCopy([x], "cpu", { after: work }).get();
 *   assert.deepEqual([...back.toTypedArray()], [5, 5]);
 *   await work.done();
 *   assert.ok(work.ready());
 *   x.dispose();
 *   module.dispose();
 * }
 * ```
 */
export class GpuWork {
  readonly #device: DeviceIndex;
  readonly #stream: number;
  readonly #what: string;
  readonly #state: WorkState;

  static {
    construct = (device, stream, event, what, holds, onSettle) =>
      new GpuWork(device, stream, event, what, holds, onSettle);
    stateOf = (work) => work.#state;
    queuedOn = (work) => inFlight.add(work, work.#device, work.#stream);
    waitOf = (work, device, stream) => work.#enqueueWait(device, stream);
  }

  /**
   * Library-internal: `Kernel.launch` and the library make work (`new
   * GpuWork()` throws a `TypeError`: forged work entered the queues that
   * every later copy polls, and made each of them throw).
   */
  private constructor(
    device: DeviceIndex,
    stream: number,
    event: number,
    what: string,
    holds?: Releasable[],
    onSettle?: () => void,
  ) {
    if (!constructing) {
      throw new TypeError("Cannot construct a GpuWork directly: Kernel.launch() makes them");
    }
    this.#device = device;
    this.#stream = stream;
    this.#what = what;
    this.#state = new WorkState(device, event, what, holds, onSettle);
    if (event !== 0) inFlight.add(this, device, stream);
  }

  /**
   * Whether the work has completed or failed. Never blocks.
   *
   * @returns true once `done()` would settle without waiting
   */
  ready(): boolean {
    return this.#state.ready();
  }

  /**
   * Resolves once the work has completed on the GPU. Never blocks the event
   * loop (the wait runs on a Deno blocking-pool thread).
   *
   * @returns the same Promise on every call; it rejects with a `CudaError`
   * if the work failed (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`)
   */
  done(): Promise<void> {
    return this.#state.done();
  }

  /**
   * Resolves once the work is queued on the GPU: at once, but for a launch
   * ordered after a copy that is not queued yet (it is queued with that
   * copy). From then on `enqueueWait` works; `after` needs no such wait.
   *
   * @returns a Promise that rejects with the work's failure, if it failed
   * before it was queued (e.g. the copy it was ordered after failed)
   */
  queued(): Promise<void> {
    return this.#state.queued();
  }

  /**
   * Makes `stream` wait on the GPU for this work; returns at once (the CPU
   * never waits). Nothing to do once the work is done.
   *
   * @param stream the stream whose later work must run after this work
   * @throws {TypeError} for a value that is no live `CudaStream`
   * @throws {Error} for a launch not queued yet (see `queued()`): pass the
   * work as `after` to `launch`, `startCopy` or `dispose` instead
   * @throws {CudaError} when the work failed, or the driver refuses the wait
   */
  enqueueWait(stream: CudaStream): void {
    checkStream(stream, "stream");
    this.#enqueueWait(streamDevice(stream), streamAddress(stream));
  }

  #enqueueWait(device: number, stream: number): void {
    const state = this.#state;
    if (state.ready()) {
      if (state.state === FAILED) throw state.error;
      return;
    }
    if (state.event === 0) {
      throw new Error(
        `Cannot make a stream wait on the GPU for ${this.#what}, which is not queued yet (it waits for a copy that is not queued yet): pass the work as \`after\` to launch, startCopy or dispose, which are queued once it is, or await work.queued() first`,
      );
    }
    streamWaitEvent(device, stream, state.event);
  }

  /** Shows the state in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `GpuWork(${this.#what}, ${["pending", "done", "failed"][this.#state.state]})`;
  }
}
