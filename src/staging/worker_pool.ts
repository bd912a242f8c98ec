/**
 * A lazily started pool of staging Workers (see `staging_worker.ts`).
 *
 * Deno Workers keep the process alive, so the pool closes itself after
 * {@linkcode IDLE_CLOSE_MS} without work (each worker frees its pinned slots
 * first); a script that is done exits at most that long after its last copy.
 *
 * @module
 */

import { PIECE_FIELDS, SLOT_BYTES, workerFailure } from "./staging_worker.ts";

export { SLOT_BYTES };

/**
 * Unpacked CPU tensors at least this large are staged by the Worker pool
 * when `useBackgroundThread` is on; smaller ones are staged inline, where a
 * Worker round trip (23–46 µs measured) would cost more than the memcpy.
 *
 * @example Which tensors the Workers stage
 * ```ts
 * import { WORKER_MIN_BYTES } from "@mtc/core";
 * const staged = new Float32Array(WORKER_MIN_BYTES / 4).byteLength >= WORKER_MIN_BYTES;
 * console.assert(staged);
 * ```
 */
export const WORKER_MIN_BYTES = 1024 * 1024;

/** Workers close after this long without work. */
export const IDLE_CLOSE_MS = 1000;

/** A range of a large host→device copy (a piece: one slot's worth at most). */
export interface StagingPiece {
  device: number;
  dst: number;
  src: number;
  bytes: number;
}

interface PoolWorker {
  worker: Worker;
  /**
   * Settles when the worker has evaluated its module and installed its
   * message handler. Its imports load the shim with a top-level await, and a
   * message that arrives before the handler exists is lost, so nothing is
   * posted to a worker before it says it is ready.
   */
  ready: PromiseWithResolvers<void>;
  pending: Map<number, PromiseWithResolvers<void>>;
}

let workers: PoolWorker[] = [];
let nextId = 0;
let active = 0;
let idleTimer: ReturnType<typeof setTimeout> | undefined;

/** Number of workers the pool uses. */
export function poolSize(): number {
  const cores = navigator.hardwareConcurrency ?? 2;
  return Math.max(1, Math.min(8, cores - 2));
}

function start(): PoolWorker[] {
  if (workers.length > 0) return workers;
  for (let i = 0; i < poolSize(); i++) {
    const worker = new Worker(new URL("./staging_worker.ts", import.meta.url), {
      type: "module",
    });
    const entry: PoolWorker = { worker, ready: Promise.withResolvers(), pending: new Map() };
    entry.ready.promise.catch(() => {}); // reported through the jobs that wait for it
    worker.onmessage = (event: MessageEvent) => {
      if (event.data.ready) return entry.ready.resolve();
      const { id, error } = event.data;
      const waiter = entry.pending.get(id);
      if (!waiter) return;
      entry.pending.delete(id);
      if (error) waiter.reject(workerFailure(error));
      else waiter.resolve();
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      const error = new Error(`A staging worker failed: ${event.message}`);
      entry.ready.reject(error);
      for (const waiter of entry.pending.values()) waiter.reject(error);
      entry.pending.clear();
    };
    workers.push(entry);
  }
  return workers;
}

/** Splits `range` into slot-sized pieces, appended to `into`. */
export function splitIntoPieces(range: StagingPiece, into: StagingPiece[]): void {
  const { device, dst, src, bytes } = range;
  for (let offset = 0; offset < bytes; offset += SLOT_BYTES) {
    into.push({
      device,
      dst: dst + offset,
      src: src + offset,
      bytes: Math.min(SLOT_BYTES, bytes - offset),
    });
  }
}

/**
 * Stages and queues `pieces` across the workers; resolves once every piece's
 * copy is queued on its device's stream (not completed).
 */
export async function stageOnWorkers(pieces: readonly StagingPiece[]): Promise<void> {
  const pool = start();
  if (idleTimer !== undefined) clearTimeout(idleTimer);
  idleTimer = undefined;
  active++;
  try {
    const count = Math.min(pool.length, pieces.length);
    const jobs: Promise<void>[] = [];
    for (let w = 0; w < count; w++) {
      // Contiguous ranges keep each worker's reads sequential.
      const from = Math.floor((w * pieces.length) / count);
      const to = Math.floor(((w + 1) * pieces.length) / count);
      const table = new Float64Array((to - from) * PIECE_FIELDS);
      for (let i = from; i < to; i++) {
        const p = pieces[i];
        table.set([p.device, p.dst, p.src, p.bytes], (i - from) * PIECE_FIELDS);
      }
      const id = nextId++;
      const waiter = Promise.withResolvers<void>();
      const entry = pool[w];
      entry.pending.set(id, waiter);
      jobs.push(entry.ready.promise.then(() => {
        entry.worker.postMessage({ id, pieces: table }, [table.buffer]);
        return waiter.promise;
      }));
    }
    await Promise.all(jobs);
  } finally {
    if (--active === 0) {
      idleTimer = setTimeout(() => void closeStagingWorkers(), IDLE_CLOSE_MS);
    }
  }
}

/**
 * Closes the staging Workers now (each frees its pinned slots first) instead
 * of after {@linkcode IDLE_CLOSE_MS} idle. Safe to call at any time when no
 * copy is being staged; a later copy starts them again. Call it at the end of
 * a test that copies large tensors, so that no Worker or timer outlives it.
 *
 * @returns a Promise that resolves once every Worker is closed
 *
 * @example In a Deno test with the sanitizers on
 * ```ts
 * import { closeStagingWorkers } from "@mtc/core";
 * await closeStagingWorkers();
 * ```
 */
export async function closeStagingWorkers(): Promise<void> {
  if (idleTimer !== undefined) clearTimeout(idleTimer);
  idleTimer = undefined;
  const closing = workers;
  workers = [];
  await Promise.all(closing.map(({ worker, ready }) =>
    new Promise<void>((resolve) => {
      const stop = (): void => {
        worker.terminate();
        resolve();
      };
      worker.onmessage = (event: MessageEvent) => {
        if (event.data.ready) ready.resolve();
        else if (event.data.closed) stop();
      };
      ready.promise.then(() => worker.postMessage({ close: true }), stop);
    })
  ));
}
