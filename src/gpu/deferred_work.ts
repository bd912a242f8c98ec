/**
 * Work not queued yet: a launch ordered after a copy that is not queued on
 * the GPU yet exists at once, as a `GpuWork`, and is queued with that copy.
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
 * Its own file, above gpu/work.ts: the work itself does not know why it
 * waits, and only the kernels (and the ordered release, which finds a
 * stream's tail) make or look for such work.
 *
 * @module
 */

import type { Releasable } from "../copy_job.ts";
import type { DeviceIndex } from "../device.ts";
import { clearStreamTail, setStreamTail, streamTail } from "./stream_tail.ts";
import { failWorkIssue, type GpuWork, issueWork, makeWork, whenWorkQueued } from "./work.ts";

/**
 * A work to be queued on `stream` of `device` once `ready` settles, by
 * `queue` (which returns the event it recorded after it; a throw fails the
 * work); it becomes the stream's tail meanwhile. `holds` (already taken)
 * are released and `onSettle` called once it completes or fails.
 *
 * @example A queue that fails fails the work, which gives its holds back
 * ```ts
 * import assert from "node:assert/strict";
 * import { deferWork, tailWork } from "./deferred_work.ts";
 * let released = 0;
 * const work = deferWork(0, 0x40, "a test launch", Promise.resolve(), () => {
 *   throw new Error("no GPU here");
 * }, [{ release: () => void released++ }]);
 * assert.equal(tailWork(0, 0x40), work);
 * await assert.rejects(work.queued(), { message: "no GPU here" });
 * assert.equal(released, 1);
 * assert.equal(tailWork(0, 0x40), undefined);
 * ```
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
  setStreamTail(device, stream, { work, queued: whenWorkQueued(work)! });
  ready.then(() => {
    clearStreamTail(device, stream, work);
    let event: number;
    try {
      event = queue();
    } catch (error) {
      failWorkIssue(work, error);
      return;
    }
    issueWork(work, event);
  });
  return work;
}

/**
 * The last launch on the stream at address `stream` of `device` that is not
 * queued yet, if any. Every tail is a `GpuWork`: only {@linkcode deferWork}
 * sets one (gpu/stream_tail.ts keeps it by identity, to stay below
 * gpu/work.ts).
 */
export function tailWork(device: DeviceIndex, stream: number): GpuWork | undefined {
  return streamTail(device, stream)?.work as GpuWork | undefined;
}
