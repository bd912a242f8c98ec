/**
 * Submission of a routed copy: admission under the memory limits, each
 * direction's transfers, then the job the handle completes.
 *
 * @module
 */

import type { CopyJob, CopyStats, DeviceEvent } from "../copy_job.ts";
import type { Route } from "../route.ts";
import { admission } from "./admission.ts";
import { deviceToDevice } from "./device_to_device.ts";
import { arenaToDevice } from "./from_arena.ts";
import { deviceToHost, sendMirrorRun } from "./device_to_host.ts";
import { hostToDevice } from "./host_to_device.ts";
import { type InputHolds, Submission } from "./submission.ts";

/**
 * Queues every transfer of `route` and returns the job for its handle. A
 * copy that does not fit under the memory limits yet is queued when it
 * does; the job's `submitted` settles then. A failure while queueing drains
 * what was queued, releases everything, and comes back as a job whose
 * `submitted` rejects.
 */
export function submit(route: Route): CopyJob<void> {
  const admitted = admission(route);
  return admitted ? submitWhenAdmitted(route, admitted) : submitNow(route);
}

function submitNow(route: Route, stats?: CopyStats, held?: InputHolds): CopyJob<void> {
  const submission = new Submission(route, stats, held);
  try {
    if (route.fromArena.length > 0) arenaToDevice(route, submission);
    if (route.h2d.length > 0 || route.packedChunk !== undefined) {
      hostToDevice(route, submission);
    }
    for (const [source, list] of route.peerBySource()) {
      deviceToDevice(route, submission, source, list);
    }
    if (route.mirrorRun !== undefined) sendMirrorRun(route, submission);
    for (const [source, list] of route.d2hBySource()) {
      deviceToHost(route, submission, source, list);
    }
    // Without pinned staging, CUDA→CPU outputs live in ordinary memory. (A
    // copy of the indices: the route's lists are returned below, before
    // the job completes.)
    const unpinned = route.options.usePinnedStaging ? undefined : Array.from(route.d2h.view());
    return submission.job(() => {
      if (unpinned !== undefined) route.moveOutputsToOrdinaryMemory(unpinned);
    });
  } catch (error) {
    submission.abort();
    return {
      events: [],
      submitted: Promise.reject(error),
      stats: submission.stats,
      complete(): void {},
      abort(): void {},
    };
  } finally {
    route.releaseLists();
  }
}

/**
 * Like {@linkcode submit}, for a copy that must be queued only once `ready`
 * settles (ordered after work not queued yet: gpu/after.ts); then it waits
 * for memory as any copy does. A rejection of `ready` fails the copy.
 */
export function submitAfter(route: Route, ready: Promise<void>): CopyJob<void> {
  return submitWhenAdmitted(route, ready.then(() => admission(route)));
}

/**
 * A job that submits once `admitted` resolves (its events are filled in
 * then). It holds the inputs while it waits: user code runs meanwhile; a
 * copy never admitted (`admitted` rejects: it timed out, or can never fit)
 * gives the holds back when its handle aborts it (Note [Copies that wait
 * for memory] in admission.ts).
 */
export function submitWhenAdmitted(route: Route, admitted: Promise<void>): CopyJob<void> {
  const events: DeviceEvent[] = [];
  const stats = Submission.emptyStats(route);
  const held = Submission.holdInputs(route);
  let job: CopyJob<void> | undefined;
  const submitted = admitted.then(async () => {
    job = submitNow(route, stats, held);
    if (job.submitted) await job.submitted;
    events.push(...job.events);
  });
  return {
    events,
    submitted,
    stats,
    waitsForMemory: true,
    complete: () => job!.complete(),
    abort: () => {
      if (job) return job.abort();
      // Never admitted: nothing was taken but the holds, the outputs and the lists.
      Submission.releaseInputs(held);
      for (const output of route.outputs) output.dispose();
      route.releaseLists();
    },
  };
}
