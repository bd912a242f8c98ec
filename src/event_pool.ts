/**
 * Reused CUDA events: one per in-flight copy, returned when it settles.
 *
 * @module
 */

import { eventCreate } from "../ffi/native.ts";

const idle: number[] = [];

/** An event handle, from the pool or newly created. */
export function acquireEvent(): number {
  return idle.pop() ?? eventCreate();
}

/** Returns an event whose recorded work has completed. */
export function releaseEvent(event: number): void {
  idle.push(event);
}
