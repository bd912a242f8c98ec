/**
 * `WorkState`: the life of one GPU work, whatever made it (a launch, a
 * marker of a deferred release): not queued yet, queued (an event recorded
 * after it), then done or failed; and the holds it gives back, once,
 * whichever way it settles.
 *
 * Its own file because the states are bookkeeping over three event
 * operations (query, wait off the event loop, give the event back), which
 * are injected: the transitions are specified on any machine, and
 * `GpuWork` (gpu/work.ts) is left with what the user sees and the GPU
 * ordering.
 *
 * @module
 */

import { eventStatus, eventSynchronizeOffThread } from "../../ffi/events.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import type { Releasable } from "../copy_job.ts";
import type { DeviceIndex } from "../device.ts";
import { releaseEvent } from "../memory/event_pool.ts";

/** Not settled yet (queued or not). */
export const PENDING = 0;
/** Completed on the GPU. */
export const DONE = 1;
/** Failed: on the GPU, or before it was queued. */
export const FAILED = 2;

/** The event operations a work's state uses (the native ones by default). */
export interface EventOps {
  /** -1 while `event` of `device` is pending, else its status (0: completed). */
  status(device: DeviceIndex, event: number): number;
  /** Resolves with the status once `event` completed, without blocking the event loop. */
  synchronize(device: DeviceIndex, event: number): Promise<number>;
  /** Gives `event` back to the device's pool (once it completed). */
  release(device: DeviceIndex, event: number): void;
}

const NATIVE: EventOps = {
  status: eventStatus,
  synchronize: eventSynchronizeOffThread,
  release: releaseEvent,
};

/**
 * The state of one GPU work (library-internal: each `GpuWork` has one).
 *
 * @example Queued, then done once its event completes: the holds go back once
 * ```ts
 * import assert from "node:assert/strict";
 * import { DONE, WorkState } from "./work_state.ts";
 * let status = -1;
 * let released = 0;
 * const holds = [{ release: () => void released++ }];
 * const state = new WorkState(0, 7, "a test launch", holds, undefined, {
 *   status: () => status,
 *   synchronize: () => Promise.resolve(0),
 *   release: () => {},
 * });
 * assert.equal(state.ready(), false);
 * status = 0;
 * assert.equal(state.ready(), true);
 * assert.equal(state.state, DONE);
 * assert.equal(released, 1);
 * ```
 */
export class WorkState {
  readonly #device: DeviceIndex;
  readonly #what: string;
  readonly #ops: EventOps;
  #event: number;
  #holds: Releasable[] | undefined;
  #onSettle: (() => void) | undefined;
  #state = PENDING;
  #error: unknown;
  #promise: Promise<void> | undefined;
  /** While not queued yet: settles once it is, or has failed (never rejects). */
  #issued: Promise<void> | undefined;
  #resolveIssued: (() => void) | undefined;

  /**
   * The state of work on `device` whose completion `event` was recorded
   * after it (0: not queued yet), described as `what` in errors; `holds`
   * (already taken) are released and `onSettle` called once it settles.
   */
  constructor(
    device: DeviceIndex,
    event: number,
    what: string,
    holds?: Releasable[],
    onSettle?: () => void,
    ops: EventOps = NATIVE,
  ) {
    this.#device = device;
    this.#event = event;
    this.#what = what;
    this.#holds = holds;
    this.#onSettle = onSettle;
    this.#ops = ops;
    if (event === 0) this.#issued = new Promise((resolve) => this.#resolveIssued = resolve);
  }

  /** {@linkcode PENDING}, {@linkcode DONE} or {@linkcode FAILED}, as last seen (never asks). */
  get state(): number {
    return this.#state;
  }

  /** The event recorded after the work; 0 while it is not queued. */
  get event(): number {
    return this.#event;
  }

  /** Why it failed, once it has. */
  get error(): unknown {
    return this.#error;
  }

  /**
   * `undefined` once the work is queued (or has failed); until then, a
   * Promise that resolves when it is, or fails (it never rejects).
   */
  whenQueued(): Promise<void> | undefined {
    return this.#state === PENDING && this.#event === 0 ? this.#issued : undefined;
  }

  /** The work, not queued yet, is queued now, with `event` recorded after it. */
  issue(event: number): void {
    this.#event = event;
    this.#resolveIssued?.();
  }

  /** The work, not queued yet, never will be: it failed with `error`. */
  fail(error: unknown): void {
    this.#error = error;
    this.#state = FAILED;
    this.#release();
    this.#resolveIssued?.();
  }

  /**
   * Holds `held` until the work settles; false (and nothing held) when it
   * already has. The caller has taken the hold (a retain) that this releases.
   */
  hold(held: Releasable): boolean {
    if (this.#state !== PENDING || (this.#event !== 0 && this.ready())) return false;
    (this.#holds ??= []).push(held);
    return true;
  }

  /** Whether the work has completed or failed (asks the event once queued). Never blocks. */
  ready(): boolean {
    if (this.#state !== PENDING) return true;
    if (this.#event === 0) return false; // not queued yet
    const status = this.#ops.status(this.#device, this.#event);
    if (status === -1) return false;
    this.#settle(status);
    return true;
  }

  /**
   * Resolves once the work has completed (after it is queued, for work not
   * queued yet); the same Promise on every call, rejecting with its failure.
   */
  done(): Promise<void> {
    this.#promise ??= this.#issued && this.#event === 0 && this.#state === PENDING
      ? this.#issued.then(() => this.#wait())
      : this.#wait();
    return this.#promise;
  }

  /** Resolves once the work is queued; rejects if it failed before it was. */
  queued(): Promise<void> {
    const fail = () => {
      if (this.#event === 0 && this.#state === FAILED) throw this.#error;
    };
    return this.#issued ? this.#issued.then(fail) : Promise.resolve();
  }

  #wait(): Promise<void> {
    if (this.ready()) return this.#state === DONE ? Promise.resolve() : Promise.reject(this.#error);
    return this.#ops.synchronize(this.#device, this.#event).then((status) => {
      if (this.#state === PENDING) this.#settle(status);
      if (this.#state === FAILED) throw this.#error;
    });
  }

  #settle(status: number): void {
    if (status === 0) {
      this.#state = DONE;
    } else {
      this.#state = FAILED;
      this.#error = cudaError(status, `complete ${this.#what}`);
    }
    this.#ops.release(this.#device, this.#event);
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
