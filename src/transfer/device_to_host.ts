/**
 * CUDA → CPU: runs of tensors that lie in order in one device block go
 * with one DMA each (mirror_runs.ts); other small tensors are gathered on
 * their device into one packed buffer per chunk (one kernel) and sent with
 * one DMA into a pinned chunk; the rest one by one into pinned blocks.
 *
 * @module
 */

import { copyAsync, gather } from "../../ffi/native.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { Storage } from "../memory/storage.ts";
import type { Route } from "../route.ts";
import { gatherChunks, placeChunks } from "./chunks.ts";
import { findRuns, sendRuns } from "./mirror_runs.ts";
import type { Submission } from "./submission.ts";

/**
 * Sends the run a compiled walk took (route.ts, `mirrorRun`): its outputs
 * get a pinned block, laid out as the device range from `lead` on, and
 * the range goes with one DMA; then the device's completion event. The
 * outputs' block is held until the copy settles (as `sendRuns` holds it).
 */
export function sendMirrorRun(route: Route, submission: Submission): void {
  const { source, start, bytes, lead, storage, count } = route.mirrorRun!;
  route.mirrorRun = undefined;
  submission.involve(source);
  const block = pinnedPool.acquire(lead + bytes);
  storage.attach(block, count);
  submission.holdOutput(storage);
  copyAsync({ device: source, dst: block.address + lead, src: start, bytes });
  submission.stats.copies++;
  submission.stats.chunks++;
  submission.stats.packedTensors += count;
  submission.recordCompletion(source);
}

/** Queues the CUDA→CPU leaves `list` of device `source`, then its completion event. */
export function deviceToHost(
  route: Route,
  submission: Submission,
  source: number,
  list: ArrayLike<number>,
): void {
  submission.involve(source);
  const pack = route.options.packCpuTensors;
  const runs = pack ? findRuns(route, list) : undefined;
  // The leaves left for the gather (all of them without runs), planned
  // now: the walk plans none (most copies back go by runs alone).
  const rest = runs ? sendRuns(route, submission, source, list, runs) : list;
  const chunks = pack
    ? placeChunks(route, {
      indices: rest,
      pool: pinnedPool,
    })
    : [];
  const packed = gatherChunks(route, submission, {
    source,
    list: rest,
    chunks,
    chunkPool: pinnedPool,
    holdOutputs: true,
    send: ({ table, count, scratch, dst, payload }) => {
      gather({ device: source, table, count, dst: scratch, hostDst: dst, bytes: payload });
      submission.stats.copies++;
    },
  });
  let packedCount = 0;
  for (const { plan } of chunks) packedCount += plan.members.length;
  for (let k = 0; packedCount < rest.length && k < rest.length; k++) {
    if (packed[k]) continue;
    const i = rest[k];
    const bytes = route.outputs[i].byteLength;
    const block = pinnedPool.acquire(bytes);
    const storage = new Storage(pinnedPool, block, 1);
    route.bind(i, storage, 0);
    submission.holdOutput(storage);
    if (bytes > 0) {
      copyAsync({ device: source, dst: block.address, src: route.sourceAddress(i), bytes });
      submission.stats.copies++;
    }
  }
  submission.recordCompletion(source);
}
