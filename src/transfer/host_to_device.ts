/**
 * CPU → CUDA: packed chunks first (one DMA each), then the other leaves one
 * by one; large pageable leaves are staged in the background.
 *
 * @module
 */

import { copyAsync, copyFromBuffer } from "../../ffi/native.ts";
import { ARRAY_CLASSES, arrayCodeOf, CODE_BYTES, CODE_SHIFT, NO_CODE } from "../array_code.ts";
import { builtinClassOf, type TypedArray, type TypedArrayConstructor } from "../dtype.ts";
import type { Block } from "../memory/block_pool_types.ts";
import { devicePool } from "../memory/device_memory.ts";
import { pinnedView } from "../memory/pinned_memory.ts";
import { Storage } from "../memory/storage.ts";
import type { ChunkPlan } from "../pack_plan.ts";
import type { Route } from "../route.ts";
import { BACKGROUND_MIN_BYTES } from "../staging/background.ts";
import { bindChunks, placeChunks } from "./chunks.ts";
import { packInParallel, PARALLEL_PACK_MIN_BYTES } from "./parallel_pack.ts";
import type { Submission } from "./submission.ts";

/** Queues every CPU→CUDA leaf of `route`. */
export function hostToDevice(route: Route, submission: Submission): void {
  const { target, options, outputs } = route;
  const h2d = route.h2d.view();
  const pool = devicePool(target);
  const packed = packedFlags(h2d.length);
  let packedCount = 0;
  submission.involve(target);
  if (options.packCpuTensors) {
    const chunks = placeChunks(route, { indices: h2d, pool, packer: route.packer });
    // Outputs are bound after the DMAs are queued, in `finally`:
    // Note [Bind outputs after the transfer, in finally] in chunks.ts.
    try {
      for (const { plan } of chunks) {
        const payload = plan.end - plan.start;
        const stage = options.usePinnedStaging ? submission.takeStaging(payload) : undefined;
        if (stage && payload >= PARALLEL_PACK_MIN_BYTES) {
          packInParallel(route, h2d, plan, stage, packed);
        } else {
          packBySet(route, h2d, plan, stage, packed);
        }
        const dst = plan.base + plan.start;
        if (stage) {
          copyAsync({ device: target, dst, src: stage.address, bytes: payload });
        } else {
          copyFromBuffer({ device: target, dst, src: new Uint8Array(pageableScratch, 0, payload) });
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
    if (!options.usePinnedStaging) {
      copyFromBuffer({ device: target, dst: block.address, src });
    } else if (options.useBackgroundThread && bytes >= BACKGROUND_MIN_BYTES && !isResizable(src)) {
      submission.stageInBackground({ device: target, dst: block.address, src, bytes });
    } else {
      const stage = submission.takeStaging(bytes);
      pinnedView(stage, builtinClassOf(src)).set(src as never, 0);
      copyAsync({ device: target, dst: block.address, src: stage.address, bytes });
    }
  }
}

/**
 * Packs the members of `plan` (positions in `h2d`) into `stage`, or into
 * the pageable scratch buffer without one, by one `set` per member, and
 * marks them in `packed`. The bytes and class of each come from the
 * route's columns, filled in by the walk (the class code picks a view of
 * the chunk of that class, so that the bytes are copied unchanged).
 */
function packBySet(
  route: Route,
  h2d: ArrayLike<number>,
  plan: ChunkPlan,
  stage: Block | undefined,
  packed: Uint8Array,
): void {
  const { members, offsets, start, end } = plan;
  const { hostData } = route;
  const codes = route.codes.data;
  const views = chunkViews;
  views.fill(undefined);
  for (let m = 0; m < members.length; m++) {
    const k = members[m];
    packed[k] = 1;
    const i = h2d[k];
    let code = codes[k];
    let src = hostData[i];
    if (code === NO_CODE || src === undefined) {
      src = route.hostBytes(i);
      code = arrayCodeOf(src);
    }
    const view = views[code] ??= stage
      ? pinnedView(stage, ARRAY_CLASSES[code])
      : pageableView(end - start, ARRAY_CLASSES[code]);
    // The element index as a small integer (a shift, not a division into a double).
    const at = offsets[m] - start;
    view.set(src as never, at < 2 ** 31 ? at >> CODE_SHIFT[code] : at / CODE_BYTES[code]);
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

// The packing loop's views of one chunk by class code (reused: no arrays per chunk).
const chunkViews: (TypedArray | undefined)[] = new Array(ARRAY_CLASSES.length).fill(undefined);

let pageableScratch = new ArrayBuffer(0);
const pageableViews = new Map<unknown, TypedArray>();

/**
 * A reusable ordinary (pageable) host buffer for packing without pinning.
 * The driver copies from pageable memory before the call returns, so one
 * buffer serves every chunk.
 */
function pageableView(bytes: number, cls: TypedArrayConstructor): TypedArray {
  if (pageableScratch.byteLength < bytes) {
    pageableScratch = new ArrayBuffer(2 ** Math.ceil(Math.log2(bytes)));
    pageableViews.clear();
  }
  let view = pageableViews.get(cls);
  if (!view) pageableViews.set(cls, view = new cls(pageableScratch));
  return view;
}
