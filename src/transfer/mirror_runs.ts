/**
 * CUDA → CPU copies of tensors that lie in order in one device block: each
 * such run goes with one DMA into a pinned block laid out as the device
 * range, without the gather kernel.
 *
 * A result of a copy to a device lies that way (its packed chunk holds the
 * leaves in input order, a few bytes of padding apart), and copying it back
 * is this library's commonest GPU→CPU copy. The gather (device_to_host.ts)
 * puts a kernel, which reads its table from mapped host memory, before the
 * DMA: on an H100 lease the reference batch's gather and copy took 24.4 µs
 * where one DMA of its bytes took 10.6. A run copies the range from its
 * first leaf's first byte to its last leaf's last byte, padding included,
 * and each output views its bytes at the same distance from the range's
 * start as on the device.
 *
 * Rules: a run is consecutive packing candidates (CUDA→CPU leaves of one
 * device of at most 256 KiB and `maxPackedChunkBytes`; the larger ones go
 * alone, as with packing, and do not end a run) that hold the same pooled
 * storage (one device block: every byte between two of its tensors is
 * memory of that block), at rising addresses at most
 * {@linkcode MAX_RUN_GAP} bytes apart, the range at most
 * `maxPackedChunkBytes`; two leaves at least (an empty leaf joins an
 * open run, wherever it lies). A run counts as a packed
 * chunk in the copy's stats. The pinned block starts at the range's
 * address modulo {@linkcode RUN_ADDRESS_MODULUS}, so each output keeps its
 * device address's alignment.
 *
 * @module
 */

import { copyAsync } from "../../ffi/native.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { Storage } from "../memory/storage.ts";
import type { ResolvedOptions } from "../options.ts";
import { MAX_PACKED_TENSOR_BYTES } from "../pack_plan.ts";
import type { Route } from "../route.ts";
import type { Submission } from "./submission.ts";

/** The widest gap between neighbours of a run (a packed chunk's padding is under 16 bytes by default). */
export const MAX_RUN_GAP = 256;

/** A run's pinned block keeps the range's address modulo this (alignment of every output). */
export const RUN_ADDRESS_MODULUS = 256;

/** A run: its positions in the list, and the device range `start` to `end` they lie in. */
export interface MirrorRun {
  members: number[];
  start: number;
  end: number;
}

/** What finding runs reads of a route (tests give a stand-in). */
export interface RunSources {
  /** See {@linkcode Route.options}. */
  readonly options: Pick<ResolvedOptions, "maxPackedChunkBytes">;
  /** The outputs, by leaf index (their payload bytes are the leaves'). */
  readonly outputs: ArrayLike<{ readonly byteLength: number }>;
  /** The device address of leaf `index` (not asked of an empty leaf). */
  sourceAddress(index: number): number;
  /** The pooled storage leaf `index` lies in (not asked of an empty leaf). */
  sourceStorage(index: number): unknown;
}

/** The runs among the leaves at `list` (route indices of one device's CUDA→CPU leaves), in order. */
export function findRuns(route: RunSources, list: readonly number[]): MirrorRun[] {
  const runs: MirrorRun[] = [];
  const chunkLimit = route.options.maxPackedChunkBytes;
  const leafLimit = Math.min(MAX_PACKED_TENSOR_BYTES, chunkLimit);
  let members: number[] = [];
  let start = 0;
  let end = 0;
  let storage: unknown;
  const close = () => {
    if (members.length >= 2) runs.push({ members, start, end });
    members = [];
  };
  for (let k = 0; k < list.length; k++) {
    const i = list[k];
    const bytes = route.outputs[i].byteLength;
    if (bytes > leafLimit) continue;
    // An empty leaf joins an open run wherever it lies (its output is
    // bound at the block's start: it views no byte).
    if (bytes === 0) {
      if (members.length > 0) members.push(k);
      continue;
    }
    const address = route.sourceAddress(i);
    const held = route.sourceStorage(i);
    if (
      members.length === 0 || held !== storage || address < end || address - end > MAX_RUN_GAP ||
      address + bytes - start > chunkLimit
    ) {
      close();
      start = address;
      storage = held;
    }
    members.push(k);
    end = address + bytes;
  }
  close();
  return runs;
}

/**
 * Queues one DMA per run from device `source` into a pinned block of its
 * own and binds the run's outputs to it (after the DMA is queued, in
 * `finally`: Note [Bind outputs after the transfer, in finally] in
 * chunks.ts); marks the positions sent in `sent`.
 */
export function sendRuns(
  route: Route,
  submission: Submission,
  source: number,
  list: readonly number[],
  runs: readonly MirrorRun[],
  sent: Uint8Array,
): void {
  for (const { members, start, end } of runs) {
    const lead = start % RUN_ADDRESS_MODULUS;
    const block = pinnedPool.acquire(lead + end - start);
    const base = block.address + lead - start; // a device address + base: its host address
    try {
      copyAsync({ device: source, dst: base + start, src: start, bytes: end - start });
      submission.stats.copies++;
    } finally {
      const storage = new Storage(pinnedPool, block, members.length);
      for (const k of members) {
        const i = list[k];
        const empty = route.outputs[i].byteLength === 0;
        route.bind(i, storage, empty ? lead : base + route.sourceAddress(i) - block.address);
        sent[k] = 1;
      }
    }
    submission.stats.packedTensors += members.length;
    submission.stats.chunks++;
  }
}
