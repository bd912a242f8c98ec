/**
 * Admission: a copy starts only when the memory it needs fits under the
 * pools' limits (src/memory/limits.ts).
 *
 * What a copy needs is estimated from its payload before anything is
 * allocated: the target device's pool holds the outputs (CPU→CUDA and
 * CUDA→CUDA), the pinned pool the staging of small pageable inputs and the
 * outputs of CUDA→CPU. Block rounding can add to it; the estimate decides
 * when a copy may start, not how much it may take.
 *
 * A copy whose need is larger than a limit can never fit and fails at once.
 * One that would fit once memory comes back waits in a first-come queue
 * (later copies queue behind it, so a large copy is not starved by small
 * ones). While copies wait, a 1 ms poll settles finished copies (their
 * staging comes back) and nudges the garbage collector (dropped results
 * give their memory back through finalizers, which run only after a
 * collection). A copy still waiting after `waitMs` fails with an error that
 * names the limit: the memory is held by live tensors, and waiting longer
 * would be a deadlock.
 *
 * @module
 */

import { reapFinished } from "../copy_handle.ts";
import { CPU, deviceName } from "../device.ts";
import type { BlockPool } from "../memory/block_pool.ts";
import { devicePool } from "../memory/device_memory.ts";
import { memoryLimits, onLimitsChanged } from "../memory/limits.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { Tensor } from "../tensor.ts";
import type { Route } from "../route.ts";
import { BACKGROUND_MIN_BYTES } from "../staging/background.ts";

/** What a copy needs of one pool. */
interface Need {
  pool: BlockPool;
  bytes: number;
  /** `pinned` or the device name, for errors. */
  memory: string;
  /** The environment variable that sets the limit, for errors. */
  variable: string;
}

/** Pinned staging the CPU→CUDA leaves need (small pageable ones only; arena leaves none). */
function pinnedStagingBytes(route: Route): number {
  const { usePinnedStaging, useBackgroundThread } = route.options;
  if (!usePinnedStaging) return 0;
  const h2d = route.h2d.view();
  let bytes = 0;
  for (let k = 0; k < h2d.length; k++) {
    const leaf = route.leaves[h2d[k]];
    if (leaf instanceof Tensor && leaf.pinned) continue;
    if (useBackgroundThread && leaf.byteLength >= BACKGROUND_MIN_BYTES) continue;
    bytes += leaf.byteLength;
  }
  return bytes;
}

function needsOf(route: Route): Need[] {
  const pinned = { pool: pinnedPool, memory: "pinned", variable: "MTC_PINNED_LIMIT" };
  if (route.target === CPU) return [{ ...pinned, bytes: route.movedBytes }];
  return [
    {
      pool: devicePool(route.target),
      bytes: route.movedBytes,
      memory: deviceName(route.target),
      variable: "MTC_DEVICE_LIMIT",
    },
    { ...pinned, bytes: pinnedStagingBytes(route) },
  ];
}

/** Whether `route`'s copy fits now; the fast path is two comparisons. */
function fits(route: Route): boolean {
  const bytes = route.movedBytes;
  if (bytes === 0) return true;
  const { pinnedBytes, deviceBytes } = memoryLimits();
  if (
    pinnedPool.reservedBytes + bytes <= pinnedBytes &&
    (route.target === CPU || devicePool(route.target).reservedBytes + bytes <= deviceBytes)
  ) {
    return true;
  }
  return needsOf(route).every((need) => need.bytes === 0 || need.pool.makeRoom(need.bytes));
}

function neverFits(route: Route): Error | undefined {
  for (const need of needsOf(route)) {
    const limit = need.pool.limitBytes;
    if (need.bytes > limit) {
      return new Error(
        `memory limit: this copy needs about ${need.bytes} bytes of ${need.memory} memory, ` +
          `more than its limit of ${limit} bytes; raise it (${need.variable} or ` +
          `setMemoryLimits) or copy the structure in parts`,
      );
    }
  }
  return undefined;
}

function timedOut(route: Route, waitMs: number): Error {
  const needs = needsOf(route);
  const need = needs.find((need) => !need.pool.makeRoom(need.bytes)) ?? needs[0];
  return new Error(
    `memory limit: this copy waited ${waitMs} ms for ${need.bytes} bytes of ${need.memory} ` +
      `memory; ${need.pool.inUseBytes} bytes are in use by live tensors and copies, limit ` +
      `${need.pool.limitBytes} bytes. Dispose results you no longer need, or raise the limit ` +
      `(${need.variable} or setMemoryLimits)`,
  );
}

interface Waiter {
  route: Route;
  deadline: number;
  waitMs: number;
  resolve(): void;
  reject(error: Error): void;
}

const queue: Waiter[] = [];
let poll: ReturnType<typeof setTimeout> | undefined;

/** Allocation that V8 counts as external memory: enough of it starts a collection. */
const NUDGE_BYTES = 8 * 1024 * 1024;

function nudgeCollector(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  else new Uint8Array(NUDGE_BYTES);
}

function pump(): void {
  poll = undefined;
  reapFinished(true);
  // One at a time: the admitted copy allocates when its submission runs
  // (a microtask later), so the next one is judged on the next poll.
  const admitted = queue.length > 0 && fits(queue[0].route);
  if (admitted) queue.shift()!.resolve();
  const now = performance.now();
  for (let i = queue.length - 1; i >= 0; i--) {
    const waiter = queue[i];
    if (now >= waiter.deadline) {
      queue.splice(i, 1);
      waiter.reject(timedOut(waiter.route, waiter.waitMs));
    }
  }
  if (queue.length === 0) return;
  if (admitted) {
    poll = setTimeout(pump, 0);
  } else {
    nudgeCollector();
    poll = setTimeout(pump, 1);
  }
}

function pumpSoon(): void {
  if (queue.length > 0 && poll === undefined) poll = setTimeout(pump, 0);
}

onLimitsChanged(pumpSoon);

/**
 * `undefined` when `route`'s copy may start now; otherwise a Promise that
 * resolves when it may, or rejects when it never will (or waited too long).
 */
export function admission(route: Route): Promise<void> | undefined {
  if (queue.length === 0 && fits(route)) return undefined;
  const never = neverFits(route);
  if (never) return Promise.reject(never);
  const waitMs = memoryLimits().waitMs;
  return new Promise<void>((resolve, reject) => {
    queue.push({ route, deadline: performance.now() + waitMs, waitMs, resolve, reject });
    pumpSoon();
  });
}
