/**
 * CPU → CUDA: packed chunks first (one DMA each), then the other leaves one
 * by one; large pageable leaves are staged in the background.
 *
 * @module
 */

import { copyAsync, copyFromBuffer } from "../../ffi/native.ts";
import { type TypedArray, viewByteLength } from "../dtype.ts";
import { devicePool } from "../memory/device_memory.ts";
import { Storage } from "../memory/storage.ts";
import type { Route } from "../route.ts";
import { BACKGROUND_MIN_BYTES } from "../staging/background.ts";
import { inputChanged, packBySet, packView, pageableChunk } from "../staging/pack.ts";
import { packingThreads, packInParallel } from "../staging/parallel_pack.ts";
import { bindChunks, CHUNK_BASE_ALIGNMENT, placeChunks } from "./chunks.ts";
import type { Submission } from "./submission.ts";

/**
 * Sends the chunk the walk packed (route.ts, `packedChunk`): its outputs
 * get a device block, and the pinned block goes with one DMA and is
 * released when the copy settles.
 */
function sendPackedChunk(route: Route, submission: Submission): void {
  const { block: stage, storage, bytes, count } = route.packedChunk!;
  route.packedChunk = undefined;
  submission.adoptStaging(stage);
  const pool = devicePool(route.target);
  const block = pool.acquire(bytes);
  if (block.address % CHUNK_BASE_ALIGNMENT !== 0) {
    // The walk placed the leaves for a base aligned as every CUDA allocation is.
    pool.release(block);
    throw new Error(
      `Cannot send a packed chunk to device memory at ${block.address}: CUDA gave an address not aligned to ${CHUNK_BASE_ALIGNMENT} bytes`,
    );
  }
  storage.attach(block, count);
  copyAsync({ device: route.target, dst: block.address, src: stage.address, bytes });
  submission.stats.chunks++;
  submission.stats.copies++;
  submission.stats.packedTensors += count;
}

/** Queues every CPU→CUDA leaf of `route`. */
export function hostToDevice(route: Route, submission: Submission): void {
  const { target, options, outputs } = route;
  submission.involve(target);
  if (route.packedChunk !== undefined) sendPackedChunk(route, submission);
  if (route.h2d.length === 0) return;
  const h2d = route.h2d.view();
  const pool = devicePool(target);
  const packed = packedFlags(h2d.length);
  let packedCount = 0;
  if (options.packCpuTensors) {
    const chunks = placeChunks(route, { indices: h2d, pool, packer: route.packer });
    // Outputs are bound after the DMAs are queued, in `finally`:
    // Note [Bind outputs after the transfer, in finally] in chunks.ts.
    try {
      for (const { plan } of chunks) {
        const payload = plan.end - plan.start;
        const stage = options.usePinnedStaging ? submission.takeStaging(payload) : undefined;
        const threads = stage ? packingThreads(payload, plan.members.length) : 0;
        if (stage && threads > 0) {
          packInParallel(route, h2d, plan, stage, packed, threads);
        } else {
          packBySet(route, h2d, plan, stage, packed);
        }
        const dst = plan.base + plan.start;
        if (stage) {
          copyAsync({ device: target, dst, src: stage.address, bytes: payload });
        } else {
          copyFromBuffer({ device: target, dst, src: pageableChunk(payload) });
        }
        submission.stats.chunks++;
        submission.stats.copies++;
        submission.stats.packedTensors += plan.members.length;
        packedCount += plan.members.length;
      }
    } finally {
      bindChunks(route, chunks, { indices: h2d, pool });
    }
  }
  if (packedCount === h2d.length) return;
  for (let k = 0; k < h2d.length; k++) {
    if (packed[k]) continue;
    const i = h2d[k];
    const bytes = outputs[i].byteLength;
    const block = pool.acquire(bytes);
    route.bind(i, new Storage(pool, block, 1), 0);
    if (bytes === 0) continue;
    submission.stats.copies++;
    if (route.isPinned(i)) {
      copyAsync({ device: target, dst: block.address, src: route.sourceAddress(i), bytes });
      continue;
    }
    const src = route.hostBytes(i);
    const now = viewByteLength(src);
    if (now !== bytes) throw inputChanged(bytes, now);
    if (!options.usePinnedStaging) {
      copyFromBuffer({ device: target, dst: block.address, src });
    } else if (options.useBackgroundThread && bytes >= BACKGROUND_MIN_BYTES && !isResizable(src)) {
      submission.stageInBackground({ device: target, dst: block.address, src, bytes });
    } else {
      const stage = submission.takeStaging(bytes);
      packView(stage, 0, src);
      copyAsync({ device: target, dst: block.address, src: stage.address, bytes });
    }
  }
}

/**
 * Whether `view`'s buffer can change size. Deno refuses those as arguments of
 * the nonblocking calls that stage in the background (it could not keep
 * their memory in place), so they are staged here, synchronously.
 */
function isResizable(view: TypedArray): boolean {
  const buffer = view.buffer as ArrayBuffer & { growable?: boolean };
  return buffer.resizable === true || buffer.growable === true;
}

let packedScratch = new Uint8Array(1024);

/**
 * Zeroed flags for `n` leaves (at least `n`: the first `n` count), reused (a TypedArray made per copy cost a
 * one-leaf copy ~4 % of its time): read only within `hostToDevice`.
 */
function packedFlags(n: number): Uint8Array {
  if (packedScratch.length < n) {
    packedScratch = new Uint8Array(Math.max(n, 2 * packedScratch.length));
  }
  packedScratch.fill(0, 0, n);
  return packedScratch;
}
