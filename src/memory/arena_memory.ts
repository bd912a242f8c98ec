/**
 * The memory behind a host arena: pinned where a CUDA device is usable,
 * ordinary memory elsewhere, registered as an arena's so that copies send
 * its views from where they lie, and freed once: by `dispose()`, or by a
 * finalizer once the arena and every view of it are unreachable.
 *
 * Apart from `HostArena` (`host_arena.ts`), which carves views out of it,
 * because owning native memory (its finalizer, its count in `memoryStats`,
 * the order of detaching and freeing) is a concern of its own.
 *
 * @module
 */

import {
  hostAlloc,
  hostFree,
  hostFreeAfterViews,
  hostKeep,
  pinnedArrayBuffer,
  pinnedBuffersCounted,
} from "../../ffi/native.ts";
import {
  arenaCollected,
  type ArenaMemory,
  registerArena,
  unregisterArena,
} from "../arena_index.ts";
import { deviceCount } from "../device.ts";
import { freeUnviewedPinned } from "./process_cache.ts";

/** An arena's memory: where it lies, and the one buffer every view is made of. */
export interface ArenaBacking {
  /** Address of the first byte (0: ordinary memory, made without a GPU). */
  readonly address: number;
  /** The buffer over the memory. */
  readonly buffer: ArrayBuffer;
  /** Whether the shim counts `buffer` (pinned, where the runtime gives Node-API). */
  readonly counted?: boolean;
}

/** How many copies in flight read an arena (the holds copies take). */
export interface ArenaCopies {
  /** Copies in flight that read the arena. */
  inFlight: number;
}

// Keyed on the buffer, not the arena: views keep the buffer alive, so the
// memory goes only when the arena and every view of it are unreachable.
// Counted memory (native/host_views.c) belongs to its buffers from birth:
// the shim frees it once the last one dies (a buffer the user moved away
// keeps it, wherever it went), so here only the count changes, and what
// has died is freed. Uncounted memory is freed here.
const registry = new FinalizationRegistry<{ address: number; bytes: number; counted: boolean }>(
  ({ address, bytes, counted }) => {
    if (counted) freeUnviewedPinned();
    else hostFree(address);
    pinnedArenas--;
    pinnedArenaBytes -= bytes;
    arenaCollected();
  },
);

/** Buffers of arenas that copies or deferred releases hold (kept reachable meanwhile). */
const heldArenaBuffers = new Set<ArrayBuffer>();

/** Pinned arenas not freed yet, and their bytes (for `memoryStats`). */
let pinnedArenas = 0;
let pinnedArenaBytes = 0;

/**
 * The pinned host arenas that exist now and their bytes (outside the
 * pools; arenas of ordinary memory, made without a GPU, do not count).
 */
export function arenaMemory(): { arenas: number; bytes: number } {
  return { arenas: pinnedArenas, bytes: pinnedArenaBytes };
}

/**
 * Allocates `bytes` of arena memory: pinned, and registered as an arena's
 * with holds that count into `copies`, where a CUDA device is usable;
 * ordinary memory otherwise, so that the same code runs on the CPU.
 *
 * @throws {CudaError} when pinned memory cannot be allocated
 */
export function allocateArena(bytes: number, copies: ArenaCopies): ArenaBacking {
  if (deviceCount() === 0) return { address: 0, buffer: new ArrayBuffer(bytes) };
  const address = hostAlloc(bytes);
  const buffer = pinnedArrayBuffer(address, bytes);
  const counted = pinnedBuffersCounted();
  // Freed by the shim when its last buffer dies, even in a Worker that is
  // ended (a terminated isolate runs no finalizer of ours).
  if (counted) hostFreeAfterViews(address, false);
  const backing = { address, buffer, counted };
  // What copies see of the arena (holds are not the user's to take), and
  // nothing that reaches the arena itself (nothing but the arena needs to
  // keep it).
  const memory: ArenaMemory = {
    address,
    // While held, the buffer is kept reachable: the finalizer, keyed on it,
    // freed the memory of an arena dropped with its views while a hold
    // (`dispose({ after })` of a tensor over it) still waited for GPU work.
    hold: () => {
      if (copies.inFlight++ === 0) heldArenaBuffers.add(backing.buffer);
    },
    release: () => {
      if (--copies.inFlight === 0) heldArenaBuffers.delete(backing.buffer);
    },
  };
  registerArena(backing.buffer, memory);
  pinnedArenas++;
  pinnedArenaBytes += bytes;
  registry.register(backing.buffer, { address, bytes, counted }, backing);
  return backing;
}

/**
 * Frees an arena's memory now, once (the finalizer will not run for it):
 * every view becomes empty before the memory goes.
 */
export function freeArena(backing: ArenaBacking, bytes: number): void {
  registry.unregister(backing);
  const { address, buffer } = backing;
  unregisterArena(buffer);
  // A buffer the user detached (`transfer()`, or posted to a Worker) has
  // nothing left to detach here: its memory moved with it, and the shim
  // frees it once that buffer is gone (memoryStats' `movedAway` counts it
  // meanwhile). Detached here, the last buffer dies at once (its finalizer
  // runs in `transfer`) and the memory is freed now. An uncounted buffer
  // (no Node-API) that moved keeps its memory for good.
  const moved = buffer.detached;
  if (!moved) buffer.transfer(0);
  if (address === 0) return;
  pinnedArenas--;
  pinnedArenaBytes -= bytes;
  if (backing.counted) {
    if (moved) hostFreeAfterViews(address, true);
    freeUnviewedPinned();
    return;
  }
  if (moved) hostKeep(address, bytes);
  hostFree(address);
}

/**
 * Checks that no copy in flight reads the arena before it is reset or
 * freed (`what`: which), so a region is never handed out again while the
 * GPU may still read it.
 *
 * @throws {Error} naming how many copies still read it
 */
export function checkArenaIdle(copies: ArenaCopies, what: string): void {
  const inFlight = copies.inFlight;
  if (inFlight > 0) {
    throw new Error(
      `Cannot ${what} a hostArena that ${inFlight} copies in flight still read; ` +
        `await their get() first`,
    );
  }
}
