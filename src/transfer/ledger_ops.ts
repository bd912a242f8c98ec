/**
 * What the ledger of a copy (submission.ts) works with: the route it
 * reads, and the pinned pool, CUDA event operations and background staging
 * it uses, injected so that the ledger is tested without a GPU.
 *
 * @module
 */

import { eventRecord } from "../../ffi/events.ts";
import { streamSynchronize } from "../../ffi/streams.ts";
import type { ArenaMemory } from "../arena_index.ts";
import type { Block } from "../memory/block_pool_types.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import type { Storage } from "../memory/storage.ts";
import { type BackgroundRange, stageInBackground } from "../staging/background.ts";

/** What the ledger reads of a `Route` (route.ts); tests give a stand-in. */
export interface LedgerRoute {
  /** How many tensors the copy's structure holds (for its stats). */
  readonly tensors: number;
  /** Their payload bytes (for its stats). */
  readonly bytes: number;
  /** The device the copy writes to (see `Route.target`). */
  readonly target: number;
  /** The outputs, disposed when the copy fails. */
  readonly outputs: readonly { dispose(): void }[];
  /** The host arenas the copy reads from (see `Route.arenas`). */
  readonly arenas: readonly Pick<ArenaMemory, "hold" | "release">[];
  /** The pooled storages of the inputs. */
  inputStorages(): readonly Pick<Storage, "retain" | "release">[];
  /** Records where the inputs' bytes lie (before they are held for a wait). */
  captureSources(): void;
}

/**
 * The pinned pool, the CUDA event operations and background staging the
 * ledger uses: CUDA's ({@linkcode CUDA_LEDGER_OPS}), unless a test gives
 * others.
 */
export interface LedgerOps {
  /** A pinned block of at least `bytes` (the pinned pool's `acquire`). */
  acquireStaging(bytes: number): Block;
  /** Gives a pinned block back (the pinned pool's `release`). */
  releaseStaging(block: Block): void;
  /** An event of `device` from the event pool. */
  acquireEvent(device: number): number;
  /** Gives an event back to the event pool. */
  releaseEvent(device: number, event: number): void;
  /** Records `event` after the work queued so far on `device`'s stream. */
  recordEvent(device: number, event: number): void;
  /** Waits until `device`'s stream has run everything queued on it. */
  drainStream(device: number): void;
  /** Stages and sends pageable ranges in the background; resolves once all are queued. */
  stageInBackground(ranges: BackgroundRange[]): Promise<void>;
}

/** The ledger's operations on the production path: the pinned pool and CUDA's events. */
export const CUDA_LEDGER_OPS: LedgerOps = {
  acquireStaging: (bytes) => pinnedPool.acquire(bytes),
  releaseStaging: (block) => pinnedPool.release(block),
  acquireEvent,
  releaseEvent,
  recordEvent: eventRecord,
  drainStream: streamSynchronize,
  stageInBackground,
};
