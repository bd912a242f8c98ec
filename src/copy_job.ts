/**
 * What a copy hands its handle: the work behind an `AsyncCopyHandle` (its
 * events, counters, and what to call once it completes or fails) and the
 * shapes of what it is made of.
 *
 * Types only, apart from the handle (`copy_handle.ts`), because the rooms
 * below the handle build a job (`transfer/submit.ts`, `transfer/submission.ts`)
 * and the ordering on the GPU holds things until a copy settles
 * (`gpu/work.ts`): they need these shapes, not the handle's code.
 *
 * @module
 */

/** What a copy did (the contract's `CopyStats`). */
export interface CopyStats {
  /** Tensor leaves found. */
  tensors: number;
  /** Their total payload bytes. */
  bytes: number;
  /** Leaves that travelled inside packed chunks. */
  packedTensors: number;
  /** Packed chunks used (each payload <= maxPackedChunkBytes). */
  chunks: number;
  /** Transfer operations issued (one per chunk + one per unpacked tensor, or fewer). */
  copies: number;
}

/** A CUDA event and the device it belongs to. */
export interface DeviceEvent {
  /** Device index of the event. */
  device: number;
  /** The event handle. */
  event: number;
}

/** How a handle asks about its events: CUDA's, unless a test gives others. */
export interface EventOps {
  /** 0 when the event completed, -1 while pending, else a CUDA status. Never blocks. */
  status(device: number, event: number): number;
  /** Waits for the event off the main thread; 0 or a CUDA status. */
  wait(device: number, event: number): Promise<number>;
  /** Gives a completed event back to its pool. */
  release(device: number, event: number): void;
}

/** The work behind a handle (library-internal). */
export interface CopyJob<R> {
  /** The event operations to use (default: CUDA's). */
  eventOps?: EventOps;
  /** Events recorded after all of the copy's GPU work, one per device. */
  events: DeviceEvent[];
  /** Set while background staging runs; resolves once `events` are recorded. */
  submitted?: Promise<void>;
  /** Counters of the copy. */
  stats: CopyStats;
  /** Called once the events completed: releases staging, returns the result. */
  complete(): R;
  /** Called on failure: releases everything once the GPU is idle. */
  abort(error?: unknown): void;
  /** The result structure (`outputs()`), bound to its memory at once unless `waitsForMemory`. */
  outputs?: R;
  /**
   * Whether the copy waits for memory: its outputs are bound to memory once
   * it is queued (Note [Copies that wait for memory] in transfer/admission.ts).
   */
  waitsForMemory?: boolean;
}

/** Something held until a copy or a launch settles (a storage, an arena). */
export interface Releasable {
  /** Drops the hold. */
  release(): void;
}
