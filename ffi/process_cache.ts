/**
 * The shim's process-wide caches (native/process_cache.c): idle pinned and
 * device blocks, events and background stagers shared by every isolate of
 * the process, and what each isolate holds, so that an isolate that ends
 * without running JavaScript (a Worker) strands nothing.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isolateAttached } from "./process_cache.ts";
 * assert.equal(typeof isolateAttached(), "boolean");
 * ```
 *
 * @module
 */

import { hostArrayBuffer } from "./native.ts";
import { check, cudaError, out, sym } from "./shim_call.ts";

/** The kind number of pinned host memory in the process-wide caches (a device's is its index). */
export const PINNED_KIND = -1;

/** Every kind at once, for {@linkcode cacheTrim}. */
export const ALL_KINDS = -2;

let isolate = 0;

/**
 * This isolate's id in the shim, registered on first use: when the
 * isolate's thread ends, what it still holds goes back to the caches.
 */
export function isolateId(): number {
  if (isolate === 0) {
    check(sym().mtc_isolate_attach(out), "register this isolate with the native shim");
    isolate = out[0];
  }
  return isolate;
}

/** Whether this isolate registered with the shim (it used pooled memory, events or stagers). */
export function isolateAttached(): boolean {
  return isolate !== 0;
}

/**
 * Ends this isolate in the shim (at `unload`): stops its background staging
 * (waiting at most `timeoutMs`), waits for the GPU work of every device it
 * used (its kernels on its own streams too), and caches
 * the blocks and events it still holds. False when a staging call did not
 * stop in time (its device blocks then stay out of the cache).
 */
export function isolateEnd(timeoutMs: number): boolean {
  if (isolate === 0) return true;
  const status = sym().mtc_isolate_end(isolate, timeoutMs);
  isolate = 0;
  return status === 0;
}

/** A block registered in the process-wide cache. */
export interface CachedBlock {
  /** Its record in the shim. */
  readonly id: number;
  readonly address: number;
  readonly size: number;
  /** Per-block cache of its owner (JS views of pinned memory). */
  cache?: unknown;
}

/** An idle block of exactly `size` bytes of `kind` from the process-wide cache, or undefined. */
export function blockTake(kind: number, size: number): CachedBlock | undefined {
  const status = sym().mtc_block_take(kind, isolateId(), size, out);
  if (status !== 0) throw cudaError(status, `take a cached block of ${size} bytes`);
  return out[0] < 0 ? undefined : { id: out[0], address: out[1], size };
}

/** Registers a block of `kind` this isolate just allocated; returns it with its id. */
export function blockAdopt(kind: number, address: number, size: number): CachedBlock {
  check(
    sym().mtc_block_adopt(kind, isolateId(), address, size, out),
    () => `register a block of ${size} bytes`,
  );
  return { id: out[0], address, size };
}

/**
 * Gives a block back to the process-wide cache, or frees it when its kind's
 * cache would pass `maxCachedBytes`. No view of pinned memory may remain.
 */
export function blockGive(id: number, maxCachedBytes: number): void {
  check(sym().mtc_block_give(id, maxCachedBytes), "give a block back to the cache");
}

/** Frees a registered block now. No view of pinned memory may remain. */
export function blockFree(id: number): void {
  check(sym().mtc_block_free(id), "free a pooled block");
}

/** What a trim freed, and when the next idle item will be old enough (ms; Infinity: none). */
export interface Trimmed {
  freed: number;
  nextMs: number;
}

/**
 * Frees the cached blocks of `kind` ({@linkcode ALL_KINDS} for every kind)
 * idle for `olderThanMs` or more; device memory goes back to the OS.
 */
export function cacheTrim(kind: number, olderThanMs: number): Trimmed {
  const result = new Float64Array(2);
  check(sym().mtc_cache_trim(kind, olderThanMs, result), "free cached memory");
  return { freed: result[0], nextMs: result[1] < 0 ? Infinity : result[1] };
}

let counters: Float64Array | undefined;

/**
 * The process-wide cache's counters, read without a call (native
 * memory mapped once): [0] flush requests, [1] stagers, [2] their bytes,
 * [3] idle stagers' bytes, then per kind k (0 pinned, 1 + d device d)
 * [4 + 2k] cached bytes and [5 + 2k] bytes held by every isolate together.
 */
export function cacheCounters(): Float64Array {
  if (!counters) {
    const where = new Float64Array(2);
    check(sym().mtc_cache_counters(where), "read the cache's counters");
    counters = new Float64Array(hostArrayBuffer(where[0], where[1] * 8));
  }
  return counters;
}

/** Asks every isolate to free the idle blocks it keeps for itself, at its next pool call. */
export function requestCacheFlush(): void {
  sym().mtc_cache_request_flush();
}

/** An event of `device` from the process-wide cache, or new; with its id for {@linkcode eventGive}. */
export function eventTake(device: number): { event: number; id: number } {
  check(
    sym().mtc_event_take(device, isolateId(), out),
    () => `create a CUDA event on cuda:${device}`,
  );
  return { event: out[0], id: out[1] };
}

/** Gives an event back to the process-wide cache; its recorded work has completed. */
export function eventGive(id: number): void {
  check(sym().mtc_event_give(id), "give a CUDA event back");
}

/** A background stager of `device` (`slots` × `slotBytes` pinned), cached or new; its handle. */
export function stagerTake(device: number, slots: number, slotBytes: number): number {
  check(
    sym().mtc_stager_take(device, isolateId(), slots, slotBytes, out),
    () => `allocate ${slots} × ${slotBytes} bytes of pinned staging memory for cuda:${device}`,
  );
  return out[0];
}

/** Gives a stager back to the process-wide cache (its staging call returned). */
export function stagerGive(stager: number): void {
  check(sym().mtc_stager_give(stager), "give a stager back");
}

/** Frees the stagers idle for `olderThanMs` or more. */
export function stagersTrim(olderThanMs: number): Trimmed {
  const result = new Float64Array(2);
  check(sym().mtc_stagers_trim(olderThanMs, result), "free idle stagers");
  return { freed: result[0], nextMs: result[1] < 0 ? Infinity : result[1] };
}
