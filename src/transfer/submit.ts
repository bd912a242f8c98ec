/**
 * Submission of a routed copy: each direction's transfers, then the job
 * the handle completes.
 *
 * @module
 */

import type { CopyJob } from "../copy_handle.ts";
import type { Route } from "../route.ts";
import { deviceToDevice } from "./device_to_device.ts";
import { deviceToHost } from "./device_to_host.ts";
import { hostToDevice } from "./host_to_device.ts";
import { Submission } from "./submission.ts";

/**
 * Queues every transfer of `route` and returns the job for its handle. A
 * failure while queueing drains what was queued, releases everything, and
 * comes back as a job whose `submitted` rejects.
 */
export function submit(route: Route): CopyJob<void> {
  const submission = new Submission(route);
  try {
    if (route.h2d.length > 0) hostToDevice(route, submission);
    for (const [source, list] of route.bySource(route.peer)) {
      deviceToDevice(route, submission, source, list);
    }
    for (const [source, list] of route.bySource(route.d2h)) {
      deviceToHost(route, submission, source, list);
    }
    return submission.job(() => {
      // Without pinned staging, CUDA→CPU outputs live in ordinary memory.
      if (!route.options.usePinnedStaging) route.moveOutputsToOrdinaryMemory(route.d2h);
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
