/**
 * The first-come queue of copies waiting for memory under the pools'
 * limits (see Note [Copies that wait for memory] in admission.ts), over
 * injected pools, limits, clock and timers: admission.ts gives it the
 * library's, tests give fakes.
 *
 * @module
 */

import { CPU } from "../device.ts";
import type { MemoryLimitError } from "../memory/limit_error.ts";
import type { MemoryLimits } from "../memory/limits.ts";
import {
  type AdmittedPool,
  type AdmittedRoute,
  limitError,
  type Need,
  needsOf,
} from "./memory_needs.ts";

/** The longest pause between two polls of a waiting copy, in ms. */
export const POLL_MAX_MS = 64;
/** How long a copy waits before the first garbage collection is asked for, in ms. */
export const NUDGE_FIRST_MS = 4;
/** The longest pause between two collections asked for while copies wait, in ms. */
export const NUDGE_MAX_MS = 1024;

/** A timer's handle (the runtime's, or a test clock's). */
export type Timer = ReturnType<typeof setTimeout> | number;

/**
 * The pools, limits, clock and timers the queue uses: the library's
 * (admission.ts's), unless a test gives others.
 */
export interface AdmissionDeps {
  /** The pinned pool. */
  pinned(): AdmittedPool;
  /** The pool of `device`. */
  device(device: number): AdmittedPool;
  /** The limits in force. */
  limits(): Readonly<Pick<MemoryLimits, "pinnedBytes" | "deviceBytes" | "waitMs">>;
  /** The clock, in ms. */
  now(): number;
  /** Runs `callback` in `delayMs`. */
  setTimer(callback: () => void, delayMs: number): Timer;
  /** Cancels a timer of {@linkcode AdmissionDeps.setTimer}. */
  clearTimer(timer: Timer): void;
  /** Settles every copy whose events completed (their memory comes back). */
  reapFinished(): void;
  /** Asks for a garbage collection (dropped results free memory in finalizers). */
  nudgeCollector(): void;
}

interface Waiter {
  route: AdmittedRoute;
  deadline: number;
  waitMs: number;
  resolve(): void;
  reject(error: Error): void;
}

/**
 * The first-come queue of copies waiting for memory (see the module's
 * comment); one per isolate on the production path, one per test in tests.
 */
export class AdmissionQueue {
  readonly #deps: AdmissionDeps;
  readonly #queue: Waiter[] = [];
  #timer: Timer | undefined;
  #timerDue = Infinity;
  // The poll's back-off, and the garbage collections asked for, since the
  // queue last moved.
  #pollMs = 1;
  #lastNudge = 0;
  #nudgeMs = NUDGE_FIRST_MS;

  /** A queue over `deps`' pools, limits, clock and timers. */
  constructor(deps: AdmissionDeps) {
    this.#deps = deps;
  }

  /** How many copies wait. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * `undefined` when `route`'s copy may start now; otherwise a Promise that
   * resolves when it may, or rejects when it never will (or waited too long).
   */
  admit(route: AdmittedRoute): Promise<void> | undefined {
    const queue = this.#queue;
    if (queue.length === 0 && this.#fits(route)) return undefined;
    const never = this.#neverFits(route);
    if (never) return Promise.reject(never);
    const waitMs = this.#deps.limits().waitMs;
    return new Promise<void>((resolve, reject) => {
      if (queue.length === 0) this.#restartBackOff();
      queue.push({ route, deadline: this.#deps.now() + waitMs, waitMs, resolve, reject });
      this.#pumpIn(0);
    });
  }

  /** Memory came back: the head of the queue may fit now. */
  memoryReleased(): void {
    if (this.#queue.length > 0) this.#pumpIn(0);
  }

  /** The limits changed: a waiting copy they can never fit fails now, not after waitMs. */
  limitsChanged(): void {
    const queue = this.#queue;
    for (let i = queue.length - 1; i >= 0; i--) {
      const waiter = queue[i];
      const never = this.#neverFits(waiter.route);
      if (never) {
        queue.splice(i, 1);
        waiter.reject(never);
      }
    }
    if (queue.length > 0) this.#pumpIn(0);
    else this.#stopPolling();
  }

  #needs(route: AdmittedRoute): Need[] {
    return needsOf(route, this.#deps.pinned(), this.#deps.device);
  }

  /** Whether `route`'s copy fits now; the fast path is two comparisons. */
  #fits(route: AdmittedRoute): boolean {
    const bytes = route.movedBytes;
    if (bytes === 0) return true;
    const { pinnedBytes, deviceBytes } = this.#deps.limits();
    if (
      this.#deps.pinned().reservedBytes + bytes <= pinnedBytes &&
      (route.target === CPU || this.#deps.device(route.target).reservedBytes + bytes <= deviceBytes)
    ) {
      return true;
    }
    return this.#needs(route).every((need) => need.bytes === 0 || need.pool.makeRoom(need.bytes));
  }

  #neverFits(route: AdmittedRoute): MemoryLimitError | undefined {
    for (const need of this.#needs(route)) {
      if (need.bytes > need.pool.limitBytes) return limitError(need);
    }
    return undefined;
  }

  #timedOut(route: AdmittedRoute, waitMs: number): MemoryLimitError {
    const needs = this.#needs(route);
    return limitError(needs.find((need) => !need.pool.makeRoom(need.bytes)) ?? needs[0], waitMs);
  }

  #restartBackOff(): void {
    this.#pollMs = 1;
    this.#lastNudge = this.#deps.now();
    this.#nudgeMs = NUDGE_FIRST_MS;
  }

  /** Runs `#pump` in `delayMs` (or sooner, if it is already due sooner). */
  #pumpIn(delayMs: number): void {
    const due = this.#deps.now() + delayMs;
    if (this.#timer !== undefined) {
      if (this.#timerDue <= due) return;
      this.#deps.clearTimer(this.#timer);
    }
    this.#timerDue = due;
    this.#timer = this.#deps.setTimer(() => this.#pump(), Math.max(0, delayMs));
  }

  #pump(): void {
    this.#timer = undefined;
    this.#timerDue = Infinity;
    const queue = this.#queue;
    if (queue.length === 0) return;
    this.#deps.reapFinished();
    // One at a time: the admitted copy allocates when its submission runs
    // (a microtask later), so the next one is judged on the next turn.
    const admitted = this.#fits(queue[0].route);
    if (admitted) {
      queue.shift()!.resolve();
      this.#restartBackOff();
    }
    const now = this.#deps.now();
    let deadline = Infinity;
    for (let i = queue.length - 1; i >= 0; i--) {
      const waiter = queue[i];
      if (now >= waiter.deadline) {
        queue.splice(i, 1);
        waiter.reject(this.#timedOut(waiter.route, waiter.waitMs));
      } else {
        deadline = Math.min(deadline, waiter.deadline);
      }
    }
    if (queue.length === 0) return;
    if (admitted) return this.#pumpIn(0);
    if (now - this.#lastNudge >= this.#nudgeMs) {
      this.#deps.nudgeCollector();
      this.#lastNudge = now;
      this.#nudgeMs = Math.min(2 * this.#nudgeMs, NUDGE_MAX_MS);
    }
    this.#pumpIn(Math.min(this.#pollMs, deadline - now));
    this.#pollMs = Math.min(2 * this.#pollMs, POLL_MAX_MS);
  }

  #stopPolling(): void {
    if (this.#timer !== undefined) this.#deps.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerDue = Infinity;
  }
}
