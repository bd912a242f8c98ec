/**
 * Background stagers: pinned slots through which a pageable JS buffer is
 * staged to device memory on a Deno blocking-pool thread, pipelined with
 * the DMA (src/staging/background.ts drives them; the process-wide cache of
 * idle stagers is ffi/process_cache.ts).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { stageBufferOffThread } from "./stagers.ts";
 * assert.equal(typeof stageBufferOffThread, "function"); // needs a GPU to stage
 * ```
 *
 * @module
 */

import { check, out, sym } from "./shim_call.ts";

/** Creates a stager of `device`: `slots` pinned slots of `slotBytes`; returns its handle. */
export function stagerCreate(device: number, slots: number, slotBytes: number): number {
  check(
    sym().mtc_stager_create(device, slots, slotBytes, out),
    () => `allocate ${slots} × ${slotBytes} bytes of pinned staging memory for cuda:${device}`,
  );
  return out[0];
}

/**
 * Stops `stager` for good (when its isolate ends): a staging call on it that
 * starts later fails with `MTC_E_STOPPED` (ffi/cuda_error.ts), a running one stops
 * before its next slot. True once none runs; false if one still runs after
 * `timeoutMs`.
 */
export function stagerStop(stager: number, timeoutMs: number): boolean {
  return sym().mtc_stager_stop(stager, timeoutMs) === 0;
}

/** Waits for a stager's queued copies and frees it. */
export function stagerDestroy(stager: number): void {
  check(sym().mtc_stager_destroy(stager), "free pinned staging memory");
}

/** One range of a JS buffer to stage to device memory. */
export interface StagedRange {
  /** The stager (from {@linkcode stagerCreate}) the call uses alone. */
  stager: number;
  /** Device address the range goes to. */
  dst: number;
  /** The source: a view whose memory Deno keeps alive for the call. */
  src: ArrayBufferView;
  /** Byte offset in `src` and bytes to copy. */
  offset: number;
  bytes: number;
}

/**
 * Stages a range of a JS buffer through a stager's pinned slots and queues
 * its copies, on a Deno blocking-pool thread; resolves with 0 once every
 * piece is queued, or a status. Deno holds `src`'s memory for the call, so
 * detaching it meanwhile cannot make the copy read freed memory; a buffer
 * detached before the call starts gives `MTC_E_BAD_ARGUMENT`. Resizable
 * buffers are refused by Deno (stage those on the calling thread).
 */
export function stageBufferOffThread(
  { stager, dst, src, offset, bytes }: StagedRange,
): Promise<number> {
  return sym().mtc_stage_buffer_nonblocking(stager, dst, src, offset, bytes);
}
