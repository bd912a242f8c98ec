/**
 * Reused CUDA events, one pool per device (an event can only be recorded on
 * a stream of the device it was created on): one per in-flight copy and
 * device, returned when the copy settles.
 *
 * @module
 */

import { eventCreate } from "../../ffi/native.ts";

const idle: number[][] = [];

/** An event handle of `device`, from the pool or newly created. */
export function acquireEvent(device: number): number {
  return (idle[device] ??= []).pop() ?? eventCreate(device);
}

/** Returns an event of `device` whose recorded work has completed. */
export function releaseEvent(device: number, event: number): void {
  (idle[device] ??= []).push(event);
}
