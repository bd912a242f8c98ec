/**
 * Reused CUDA events, per device (an event can only be recorded on a stream
 * of the device it was created on): one per in-flight copy and device,
 * returned when the copy settles.
 *
 * Events come from the shim's process-wide cache, which knows which isolate
 * holds which, so that a Worker that ends strands none. This isolate keeps
 * a few idle ones for itself ({@linkcode EVENT_FRONT} per device), reused
 * with no call; {@linkcode releaseIdleEvents} gives them to the other
 * isolates.
 *
 * @module
 */

import { eventGive, eventTake } from "../../ffi/process_cache.ts";

/** Idle events this isolate keeps per device; the others go back to the process. */
export const EVENT_FRONT = 64;

const idle: number[][] = [];
let ended = false;
// The shim's id of every event this isolate holds (in use or idle here).
const ids = new Map<number, number>();

/** An event handle of `device`, from the pool or newly created. */
export function acquireEvent(device: number): number {
  const event = idle[device]?.pop();
  if (event !== undefined) return event;
  const taken = eventTake(device);
  ids.set(taken.event, taken.id);
  return taken.event;
}

/** Returns an event of `device` whose recorded work has completed. */
export function releaseEvent(device: number, event: number): void {
  // After the isolate's end the shim has taken every event back.
  if (ended) return;
  const list = idle[device] ??= [];
  if (list.length < EVENT_FRONT) list.push(event);
  else give(event);
}

function give(event: number): void {
  const id = ids.get(event);
  if (id === undefined) return;
  ids.delete(event);
  eventGive(id);
}

/** Gives this isolate's idle events to the process-wide cache. */
export function releaseIdleEvents(): void {
  for (const list of idle) {
    if (!list) continue;
    for (const event of list) give(event);
    list.length = 0;
  }
}

/**
 * At the end of this isolate: forgets every event it holds, without giving
 * any back; the shim takes them back once the streams have drained.
 */
export function abandonEvents(): void {
  ended = true;
  idle.length = 0;
  ids.clear();
}
