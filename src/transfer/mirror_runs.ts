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
 * {@linkcode MAX_DEVICE_RUN_GAP} bytes apart, the range at most
 * `maxPackedChunkBytes`; two leaves at least (an empty leaf joins an
 * open run, wherever it lies). A run counts as a packed
 * chunk in the copy's stats. The pinned block starts at the range's
 * address modulo `CHUNK_BASE_ALIGNMENT` (chunks.ts: the alignment a chunk's
 * block is expected to have), so each output keeps its device address's alignment.
 *
 * @module
 */

import { copyAsync } from "../../ffi/native.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { Storage } from "../memory/storage.ts";
import type { ResolvedOptions } from "../options.ts";
import { MAX_PACKED_TENSOR_BYTES } from "../pack_plan.ts";
import type { Route } from "../route.ts";
import { CHUNK_BASE_ALIGNMENT } from "./chunks.ts";
import { MAX_DEVICE_RUN_GAP } from "../mirror_walk.ts";
import type { Submission } from "./submission.ts";

// The widest gap between neighbours of a run on a device (defined beside
// the compiled walk that applies the same rules: mirror_walk.ts).
export { MAX_DEVICE_RUN_GAP } from "../mirror_walk.ts";

/** The runs among a list of leaves: each run's range, and each position's run and address. */
export interface MirrorRuns {
  /** Each run's device range, `start` to `end`, and its number of members. */
  readonly ranges: { start: number; end: number; count: number }[];
  /** The run of each position of the list; -1 for a leaf in none. */
  readonly runOf: Int32Array;
  /** The device address of each position in a run; -1 for an empty leaf. */
  readonly addressOf: Float64Array;
}

// The columns, reused (a copy back of the reference batch fills 528 of each).
let runOfColumn = new Int32Array(1024);
let addressColumn = new Float64Array(1024);

/** What finding runs reads of a route (tests give a stand-in). */
export interface RunSources {
  /** See {@linkcode Route.options}. */
  readonly options: Pick<ResolvedOptions, "maxPackedChunkBytes">;
  /** The outputs, by leaf index (their payload bytes are the leaves'). */
  readonly outputs: ArrayLike<{ readonly byteLength: number }>;
  /** The device address of leaf `index` (not asked of an empty leaf). */
  sourceAddress(index: number): number;
  /** The pooled storage leaf `index` lies in (not asked of an empty leaf, nor where there is one). */
  sourceStorage(index: number): unknown;
  /** The pooled storages the input leaves lie in (see {@linkcode Route.inputStorages}). */
  inputStorages(): readonly unknown[];
}

/**
 * The runs among the leaves at `list` (route indices of one device's
 * CUDA→CPU leaves), in order; undefined where there is none. Its columns
 * are valid until the next call.
 *
 * @example Three tensors of one block, 16-byte aligned: one run over their range
 * ```ts
 * import assert from "node:assert/strict";
 * import { findRuns } from "./mirror_runs.ts";
 * const addresses = [4096, 4112, 4128];
 * const runs = findRuns({
 *   options: { maxPackedChunkBytes: 1 << 20 },
 *   outputs: [{ byteLength: 12 }, { byteLength: 16 }, { byteLength: 4 }],
 *   sourceAddress: (i) => addresses[i],
 *   sourceStorage: () => "one block",
 *   inputStorages: () => ["one block"],
 * }, [0, 1, 2])!;
 * assert.deepEqual(runs.ranges, [{ start: 4096, end: 4132, count: 3 }]);
 * assert.deepEqual([...runs.runOf], [0, 0, 0]);
 * ```
 */
export function findRuns(route: RunSources, list: ArrayLike<number>): MirrorRuns | undefined {
  const n = list.length;
  if (runOfColumn.length < n) {
    runOfColumn = new Int32Array(n);
    addressColumn = new Float64Array(n);
  }
  const runOf = runOfColumn.subarray(0, n);
  const addressOf = addressColumn.subarray(0, n);
  runOf.fill(-1);
  const ranges: MirrorRuns["ranges"] = [];
  const chunkLimit = route.options.maxPackedChunkBytes;
  const leafLimit = Math.min(MAX_PACKED_TENSOR_BYTES, chunkLimit);
  // The open run: its first position, members, range and storage.
  let first = -1;
  let count = 0;
  let start = 0;
  let end = 0;
  let storage: unknown;
  // Where every input lies in one storage (a result copied back whole), no
  // leaf's storage is asked.
  const one = route.inputStorages().length === 1;
  const close = (k: number) => {
    if (count >= 2) {
      ranges.push({ start, end, count });
    } else {
      for (let p = first; p >= 0 && p < k; p++) runOf[p] = -1;
    }
    first = -1;
    count = 0;
  };
  for (let k = 0; k < n; k++) {
    const i = list[k];
    const bytes = route.outputs[i].byteLength;
    if (bytes > leafLimit) continue;
    // An empty leaf joins an open run wherever it lies (its output is
    // bound at the block's start: it views no byte).
    if (bytes === 0) {
      if (count > 0) runOf[k] = ranges.length, addressOf[k] = -1, count++;
      continue;
    }
    const address = route.sourceAddress(i);
    const held = one ? storage : route.sourceStorage(i);
    if (
      count === 0 || held !== storage || address < end || address - end > MAX_DEVICE_RUN_GAP ||
      address + bytes - start > chunkLimit
    ) {
      close(k);
      first = k;
      start = address;
      storage = held;
    }
    runOf[k] = ranges.length;
    addressOf[k] = address;
    count++;
    end = address + bytes;
  }
  close(n);
  return ranges.length === 0 ? undefined : { ranges, runOf, addressOf };
}

/**
 * Queues one DMA per run from device `source` into a pinned block of its
 * own and binds the runs' outputs to them (after the DMAs are queued, in
 * `finally`: Note [Bind outputs after the transfer, in finally] in
 * chunks.ts). Returns the route indices of the leaves in no run, in order.
 */
export function sendRuns(
  route: Route,
  submission: Submission,
  source: number,
  list: ArrayLike<number>,
  { ranges, runOf, addressOf }: MirrorRuns,
): number[] {
  const storages: Storage[] = [];
  const shifts: number[] = []; // a device address + shift: its offset in the run's block
  const rest: number[] = [];
  try {
    for (const { start, end, count } of ranges) {
      const lead = start % CHUNK_BASE_ALIGNMENT;
      const block = pinnedPool.acquire(lead + end - start);
      const storage = new Storage(pinnedPool, block, count);
      storages.push(storage);
      submission.holdOutput(storage);
      shifts.push(lead - start);
      copyAsync({ device: source, dst: block.address + lead, src: start, bytes: end - start });
      submission.stats.copies++;
      submission.stats.packedTensors += count;
      submission.stats.chunks++;
    }
  } finally {
    // Every run that has a block gets its outputs, also after a failure.
    for (let k = 0; k < list.length; k++) {
      const r = runOf[k];
      if (r < 0) {
        rest.push(list[k]);
      } else if (r < storages.length) {
        // An empty leaf views no byte: at the block's first byte, aligned
        // for any dtype (the run's first byte is not, where the copy that
        // made the run packed with an alignment below 8).
        const address = addressOf[k];
        route.bind(list[k], storages[r], address < 0 ? 0 : address + shifts[r]);
      }
    }
  }
  return rest;
}
