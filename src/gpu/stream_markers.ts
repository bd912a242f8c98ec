/**
 * What stands for the work on a CUDA stream so far, for what is ordered
 * after the stream but done later: the release of disposed host memory
 * (ordered_release.ts), and launches and copies queued once other work
 * they wait for is (after.ts, kernel.ts). Asking the stream then was wrong
 * twice over: it may have been disposed meanwhile (the ordering threw), and
 * work queued on it after the call would have counted.
 *
 * @module
 */

import { eventRecordOn } from "../../ffi/events.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";
import { tailWork } from "./deferred_work.ts";
import { type CudaStream, streamAddress, streamDevice } from "./stream.ts";
import { type GpuWork, makeWork } from "./work.ts";

/**
 * A marker recorded now on `stream` (settled like a launch once the work
 * queued on it so far has run), and its last launch where that is not
 * queued yet: that launch alone does not stand for the work queued before
 * it, since it may fail without ever running. `what` names the marker in
 * errors.
 *
 * @throws {CudaError} where the marker cannot be recorded (nothing is taken then)
 */
export function streamMarkers(stream: CudaStream, what: string): GpuWork[] {
  const device = streamDevice(stream);
  const address = streamAddress(stream);
  const event = acquireEvent(device);
  try {
    eventRecordOn(device, address, event);
  } catch (error) {
    releaseEvent(device, event);
    throw error;
  }
  const markers = [makeWork(device, address, event, what)];
  const tail = tailWork(device, address);
  if (tail) markers.push(tail);
  return markers;
}
