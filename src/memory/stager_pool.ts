/**
 * The background stagers as a pinned cache: each stager is {@linkcode SLOTS}
 * pinned slots of {@linkcode SLOT_BYTES} and their events, taken for one
 * staging job and given back after it. What fills the slots is
 * `staging/background.ts`'s; this file only lends and counts them.
 *
 * Stagers are the process's (native/process_cache.c): an idle one is reused
 * by any isolate, and those an isolate holds when it ends are stopped and
 * freed, so a Worker that ends strands none; the shim ages the idle ones for
 * the idle release.
 *
 * @module
 */

import { stagerGive, stagersTrim, stagerTake } from "../../ffi/process_cache.ts";
import { processStagers } from "./process_cache.ts";
import { memoryReleased } from "./released.ts";

/** Bytes per pinned slot of a stager. */
export const SLOT_BYTES = 2 * 1024 * 1024;

/** Pinned slots per stager. */
export const SLOTS = 4;

/**
 * A stager of `device`, idle in the process-wide cache or new; its handle,
 * for `stageBufferOffThread`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   const stager = takeStager(0);
 *   try {
 *     assert.ok(stagerMemory().stagers >= 1); // one staging call on it here
 *   } finally {
 *     giveStager(stager);
 *   }
 * }
 * ```
 */
export function takeStager(device: number): number {
  return stagerTake(device, SLOTS, SLOT_BYTES);
}

/**
 * Gives a stager back once its staging call returned; it becomes idle and
 * goes back after the idle-release time, as the pools' blocks do.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   giveStager(takeStager(0));
 *   assert.ok(releaseIdleStagers() >= SLOTS * SLOT_BYTES); // it was idle
 * }
 * ```
 */
export function giveStager(stager: number): void {
  stagerGive(stager);
  memoryReleased();
}

/**
 * The background stagers of the process (every isolate's, busy or idle)
 * and their pinned bytes (each has {@linkcode SLOTS} slots of
 * {@linkcode SLOT_BYTES}; outside the pools).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const { stagers, bytes } = stagerMemory();
 * assert.equal(bytes, stagers * SLOTS * SLOT_BYTES);
 * ```
 */
export function stagerMemory(): { stagers: number; bytes: number } {
  const { stagers, bytes } = processStagers();
  return { stagers, bytes };
}

/**
 * Frees the pinned memory of the idle stagers, every isolate's (a later
 * large copy creates them again); returns the bytes freed. Stagers busy with
 * a copy stay.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const freed = releaseIdleStagers();
 * assert.equal(freed % (SLOTS * SLOT_BYTES), 0); // whole stagers
 * ```
 */
export function releaseIdleStagers(): number {
  return processStagers().stagers > 0 ? stagersTrim(0).freed : 0;
}
