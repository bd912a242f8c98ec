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
 * Works in flight are settled at each launch and each `startCopy` (and by
 * their own `ready()`/`done()`), so a dropped work still gives its holds
 * back: per stream, oldest first, up to the first one still running (work
 * on one stream completes in order), so that a long kernel on one stream
 * does not keep the holds of finished work on the others.
 *
 * Note [Work not queued yet]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A launch ordered after a copy that is not queued yet (tensors of 1 MiB and
 * more still staging in the background, or a copy waiting for memory) is
 * queued on the GPU only once that copy is: nothing ever waits on the GPU
 * for work that is not queued yet. (A GPU-side wait for a word that the
 * copy's stream writes later, `cuStreamWaitValue32`, deadlocked the device
 * with `CUDA_DEVICE_MAX_CONNECTIONS=1` on the H100, where every stream
 * shares one hardware queue; the driver's manual warns of it; and while such
 * a wait blocks, `cuMemFreeHost` or a module load waits for it on the CPU.)
 * Such a work exists at once, holding its tensor arguments; until it is
 * queued it is the stream's tail: later launches on that stream, and work
 * ordered after the stream, wait for it on the CPU too, so the stream's
 * order holds. Whatever is ordered after a work or a stream that way is
 * queued with it, in one microtask chain; no CPU thread waits.
 *
 * @module
 */

import { eventStatus, eventSynchronizeOffThread } from "../../ffi/events.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import { streamWaitEvent } from "../../ffi/streams.ts";
import { otherWork, type Releasable } from "../copy_handle.ts";
import type { DeviceIndex } from "../device.ts";
import { releaseEvent } from "../memory/event_pool.ts";
import { checkStream, type CudaStream, streamAddress, streamDevice } from "./stream.ts";
import { clearStreamTail, setStreamTail, streamTail } from "./stream_tail.ts";

const PENDING = 0;
const DONE = 1;
const FAILED = 2;

/** The works in flight on one stream, in launch order (settled ones are skipped). */
interface StreamQueue {
  readonly device: DeviceIndex;
  readonly stream: number;
  works: GpuWork[];
  head: number;
}

/** Queues by device, then by stream address; `queueList` holds the non-empty ones. */
const queues: Map<number, StreamQueue>[] = [];
const queueList: StreamQueue[] = [];
let hold: (work: GpuWork, held: Releasable) => boolean;
let issuedOf: (work: GpuWork) => Promise<void> | undefined;
let issue: (work: GpuWork, event: number) => void;
let failIssue: (work: GpuWork, error: unknown) => void;
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
  return issuedOf(work);
}

/**
 * A work to be queued on `stream` of `device` once `ready` settles, by
 * `queue` (which returns the event it recorded after it; a throw fails the
 * work); it becomes the stream's tail meanwhile. `holds` (already taken)
 * are released and `onSettle` called once it completes or fails.
 */
export function deferWork(
  device: DeviceIndex,
  stream: number,
  what: string,
  ready: Promise<unknown>,
  queue: () => number,
  holds?: Releasable[],
  onSettle?: () => void,
): GpuWork {
  const work = makeWork(device, stream, 0, what, holds, onSettle);
  setStreamTail(device, stream, { work, queued: issuedOf(work)! });
  ready.then(() => {
    clearStreamTail(device, stream, work);
    let event: number;
    try {
      event = queue();
    } catch (error) {
      failIssue(work, error);
      return;
    }
    issue(work, event);
  });
  return work;
}

/**
 * The last launch on the stream at address `stream` of `device` that is not
 * queued yet, if any. Every tail is a `GpuWork`: only {@linkcode deferWork}
 * sets one (gpu/stream_tail.ts keeps it by identity, to stay below this file).
 */
export function tailWork(device: DeviceIndex, stream: number): GpuWork | undefined {
  return streamTail(device, stream)?.work as GpuWork | undefined;
}

// Set only while makeWork constructs: users cannot construct GpuWork.
let constructing = false;
let construct: (...args: Parameters<typeof makeWork>) => GpuWork;

/**
 * Library-internal: work queued on `stream` (an address) of `device`,
 * whose completion `event` (of `device`, from the pool) was recorded after
 * it (0: not queued yet, see {@linkcode deferWork}); `holds` (already
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
  return hold(work, held);
}

function enqueue(work: GpuWork, device: DeviceIndex, stream: number): void {
  const byStream = queues[device] ??= new Map();
  let queue = byStream.get(stream);
  if (queue === undefined) {
    queue = { device, stream, works: [], head: 0 };
    byStream.set(stream, queue);
    queueList.push(queue);
  }
  queue.works.push(work);
}

/**
 * Settles the works in flight whose events completed: on each stream,
 * oldest first, up to the first one still running (`everyOne`: asks them
 * all). One query per stream with work in flight, plus one per settled work.
 */
export function reapWork(everyOne = false): void {
  for (let q = queueList.length - 1; q >= 0; q--) {
    const queue = queueList[q];
    const works = queue.works;
    let head = queue.head;
    while (head < works.length && works[head].ready()) head++;
    if (everyOne) { for (let i = head; i < works.length; i++) works[i].ready(); }
    if (head === works.length) {
      // Empty: forgotten (streams come and go).
      queues[queue.device].delete(queue.stream);
      queueList[q] = queueList[queueList.length - 1];
      queueList.pop();
    } else if (head > 64 && head * 2 > works.length) {
      queue.works = works.slice(head);
      queue.head = 0;
    } else {
      queue.head = head;
    }
  }
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
  #event: number;
  #holds: Releasable[] | undefined;
  #onSettle: (() => void) | undefined;
  #state = PENDING;
  #error: unknown;
  #promise: Promise<void> | undefined;
  readonly #what: string;
  /** While not queued yet: settles once it is, or has failed (see the note). */
  #issued: Promise<void> | undefined;
  #resolveIssued: (() => void) | undefined;

  static {
    construct = (device, stream, event, what, holds, onSettle) =>
      new GpuWork(device, stream, event, what, holds, onSettle);
    hold = (work, held) => {
      if (work.#state !== PENDING || (work.#event !== 0 && work.ready())) return false;
      (work.#holds ??= []).push(held);
      return true;
    };
    waitOf = (work, device, stream) => work.#enqueueWait(device, stream);
    issuedOf = (work) => work.#state === PENDING && work.#event === 0 ? work.#issued : undefined;
    issue = (work, event) => {
      work.#event = event;
      enqueue(work, work.#device, work.#stream);
      work.#resolveIssued?.();
    };
    failIssue = (work, error) => {
      work.#error = error;
      work.#state = FAILED;
      work.#release();
      work.#resolveIssued?.();
    };
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
    this.#event = event;
    this.#what = what;
    this.#holds = holds;
    this.#onSettle = onSettle;
    if (event !== 0) {
      enqueue(this, device, stream);
    } else {
      this.#issued = new Promise((resolve) => this.#resolveIssued = resolve);
    }
  }

  /**
   * Whether the work has completed or failed. Never blocks.
   *
   * @returns true once `done()` would settle without waiting
   */
  ready(): boolean {
    if (this.#state !== PENDING) return true;
    if (this.#event === 0) return false; // not queued yet
    const status = eventStatus(this.#device, this.#event);
    if (status === -1) return false;
    this.#settle(status);
    return true;
  }

  /**
   * Resolves once the work has completed on the GPU. Never blocks the event
   * loop (the wait runs on a Deno blocking-pool thread).
   *
   * @returns the same Promise on every call; it rejects with a `CudaError`
   * if the work failed (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`)
   */
  done(): Promise<void> {
    this.#promise ??= this.#issued && this.#event === 0 && this.#state === PENDING
      ? this.#issued.then(() => this.#wait())
      : this.#wait();
    return this.#promise;
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
    const fail = () => {
      if (this.#event === 0 && this.#state === FAILED) throw this.#error;
    };
    return this.#issued ? this.#issued.then(fail) : Promise.resolve();
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
    if (this.ready()) {
      if (this.#state === FAILED) throw this.#error;
      return;
    }
    if (this.#event === 0) {
      throw new Error(
        `Cannot make a stream wait on the GPU for ${this.#what}, which is not queued yet (it waits for a copy that is not queued yet): pass the work as \`after\` to launch, startCopy or dispose, which are queued once it is, or await work.queued() first`,
      );
    }
    streamWaitEvent(device, stream, this.#event);
  }

  #wait(): Promise<void> {
    if (this.ready()) return this.#state === DONE ? Promise.resolve() : Promise.reject(this.#error);
    return eventSynchronizeOffThread(this.#device, this.#event).then((status) => {
      if (this.#state === PENDING) this.#settle(status);
      if (this.#state === FAILED) throw this.#error;
    });
  }

  /** Shows the state in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `GpuWork(${this.#what}, ${["pending", "done", "failed"][this.#state]})`;
  }

  #settle(status: number): void {
    if (status === 0) {
      this.#state = DONE;
    } else {
      this.#state = FAILED;
      this.#error = cudaError(status, `complete ${this.#what}`);
    }
    releaseEvent(this.#device, this.#event);
    this.#release();
  }

  /** Releases the holds and calls `onSettle`, once. */
  #release(): void {
    const holds = this.#holds;
    this.#holds = undefined;
    if (holds) { for (const held of holds) held.release(); }
    const onSettle = this.#onSettle;
    this.#onSettle = undefined;
    onSettle?.();
  }
}
