/**
 * Background staging of large pageable tensors: off the main thread, in
 * parallel, pipelined with the DMA, and safe against inputs that change
 * under the copy.
 *
 * Each job (up to {@linkcode JOB_BYTES} of one tensor) is one nonblocking
 * FFI call, `mtc_stage_buffer`, which runs on Deno's blocking thread pool:
 * it copies the job's bytes into the pinned slots of a stager (lent by
 * `memory/stager_pool.ts`) and queues
 * each slot's DMA, waiting for a slot's previous DMA before reusing it. Up
 * to {@linkcode stagingConcurrency} jobs run at once, each with its own
 * stager.
 *
 * Why not Workers (the first design)? A Worker cannot hold a main-thread
 * buffer: it read the source through a raw address, so an input detached or
 * shrunk mid-copy crashed the process. Deno keeps a `buffer` argument of a
 * nonblocking call alive until the call returns, so the source cannot be
 * freed under the copy; a job that starts after the input was detached gets
 * a null pointer and fails the copy with an error instead. The calls also
 * skip the Workers' message round trips (23–46 µs) and their ready handshake.
 *
 * @module
 */

import { grantedEnv } from "../env.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import { MTC_E_BAD_ARGUMENT } from "../../ffi/cuda_error.ts";
import { stageBufferOffThread } from "../../ffi/stagers.ts";
import type { TypedArray } from "../dtype.ts";
import { giveStager, SLOT_BYTES, SLOTS, takeStager } from "../memory/stager_pool.ts";

/**
 * Unpacked CPU tensors at least this large are staged in the background
 * when `useBackgroundThread` is on; smaller ones are staged inline, where a
 * background round trip (about 20 µs) would cost more than the memcpy.
 *
 * @example Which tensors are staged in the background
 * ```ts
 * import assert from "node:assert/strict";
 * import { BACKGROUND_MIN_BYTES } from "@mtc/core";
 * assert.equal(BACKGROUND_MIN_BYTES, 1024 * 1024);
 * const large = new Float32Array(BACKGROUND_MIN_BYTES / 4); // staged in the background
 * assert.equal(large.byteLength >= BACKGROUND_MIN_BYTES, true);
 * ```
 */
export const BACKGROUND_MIN_BYTES = 1024 * 1024;

/** The most bytes one job stages: a stager's slots, once round. */
export const JOB_BYTES = SLOTS * SLOT_BYTES;

/**
 * Jobs that run at once per copy: `MTC_STAGING_THREADS` where set (and
 * granted), else the cores less two (left to the main thread and the
 * driver), at most 16. The host's copy into pinned memory bounds pageable
 * copies and one core copies only 3–6 GB/s on the GPU hosts, so the rate
 * grows with the threads (H100 lease, 32 × 8 MB: 4 threads 45 % of the
 * pinned DMA rate, 8 threads 60–68 %, 12–14 threads 70–81 %).
 */
export function stagingConcurrency(): number {
  if (configuredThreads === undefined) {
    const cores = navigator.hardwareConcurrency ?? 2;
    const asked = Math.floor(Number(grantedEnv("MTC_STAGING_THREADS")));
    configuredThreads = asked >= 1 && asked <= 64 ? asked : Math.max(1, Math.min(16, cores - 2));
  }
  return configuredThreads;
}

let configuredThreads: number | undefined;

/** A pageable range to stage to device memory. */
export interface BackgroundRange {
  device: number;
  /** The device address it goes to. */
  dst: number;
  /** The source: the tensor's own TypedArray (not a raw address). */
  src: TypedArray;
  bytes: number;
}

/**
 * Stages and queues `ranges`; resolves once every piece's copy is queued on
 * its device's stream (not completed). The first job starts before this
 * returns, so its source is held from the start; the other lanes start once
 * the caller yields (a microtask), because starting one wakes a thread of
 * Deno's blocking pool, which took 5–12 µs each on the GPU hosts, and
 * `startCopy` should return while they stage. A source detached before its
 * job starts fails the copy with an error (never a crash).
 *
 * @throws rejects with a `CudaError`, or an `Error` when a source was
 * detached before its job started
 */
export async function stageInBackground(ranges: readonly BackgroundRange[]): Promise<void> {
  const jobs: (BackgroundRange & { offset: number })[] = [];
  for (const range of ranges) {
    for (let offset = 0; offset < range.bytes; offset += JOB_BYTES) {
      jobs.push({
        ...range,
        dst: range.dst + offset,
        offset,
        bytes: Math.min(JOB_BYTES, range.bytes - offset),
      });
    }
  }
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < jobs.length && failure === undefined) {
      const { device, dst, src, offset, bytes } = jobs[next++];
      const stager = takeStager(device);
      try {
        const status = await stageBufferOffThread({ stager, dst, src, offset, bytes });
        // "Invalid argument" here means the source was detached before the job started.
        if (status === MTC_E_BAD_ARGUMENT) {
          failure ??= new Error(
            `Cannot copy a tensor of ${src.byteLength} bytes whose buffer was detached during the copy: inputs must not change until get() resolves`,
          );
        } else if (status !== 0) {
          failure ??= cudaError(status, `stage ${bytes} bytes to cuda:${device}`);
        }
      } finally {
        giveStager(stager);
      }
    }
  };
  const lanes = Math.min(stagingConcurrency(), jobs.length);
  const first = lane();
  const others = Promise.resolve().then(() => Promise.all(Array.from({ length: lanes - 1 }, lane)));
  await Promise.all([first, others]);
  if (failure !== undefined) throw failure;
}
