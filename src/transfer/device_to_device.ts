/**
 * CUDA → other CUDA: small tensors are gathered on the source device into
 * one packed buffer per chunk (one kernel) and sent with one peer copy into
 * a chunk on the target; the rest with one peer copy each. Every peer copy
 * is fenced with both devices' streams, so it runs after all work the
 * library queued on either, and later work on either runs after it.
 *
 * @module
 */

import { copyPeer, gather } from "../../ffi/native.ts";
import { devicePool } from "../memory/device_memory.ts";
import { Storage } from "../memory/storage.ts";
import type { Route } from "../route.ts";
import { gatherChunks, placeChunks } from "./chunks.ts";
import type { Submission } from "./submission.ts";

/** Queues the leaves `list` of device `source` to the route's target device. */
export function deviceToDevice(
  route: Route,
  submission: Submission,
  source: number,
  list: number[],
): void {
  const target = route.target;
  const pool = devicePool(target);
  submission.involve(target);
  submission.involve(source);
  const peerCopy = (dst: number, src: number, bytes: number): void => {
    // Fence A is recorded on the target's stream, fence B on the source's.
    const fences = { beforeCopy: submission.fence(target), afterCopy: submission.fence(source) };
    copyPeer({ dstDevice: target, dst, srcDevice: source, src, bytes, fences });
    submission.stats.copies++;
  };
  const packed = gatherChunks(route, submission, {
    source,
    list,
    // Planned now (the walk plans CPU→CUDA leaves only).
    chunks: route.options.packCpuTensors ? placeChunks(route, { indices: list, pool }) : [],
    chunkPool: pool,
    send: ({ table, count, scratch, dst, payload }) => {
      gather({ device: source, table, count, dst: scratch });
      // The peer copy runs on the source's stream: later users of the
      // scratch block queue behind it.
      peerCopy(dst, scratch, payload);
    },
  });
  for (let k = 0; k < list.length; k++) {
    if (packed[k]) continue;
    const i = list[k];
    const bytes = route.outputs[i].byteLength;
    const block = pool.acquire(bytes);
    route.bind(i, new Storage(pool, block, 1), 0);
    peerCopy(block.address, route.sourceAddress(i), bytes);
  }
}
