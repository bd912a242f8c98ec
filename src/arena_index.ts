/**
 * Which ArrayBuffers are host arenas' memory: the route asks it for each
 * CPU leaf, so that a tensor that already lies in pinned memory is sent from
 * where it is. Pure bookkeeping (no FFI): the arena itself lives in
 * `memory/host_arena.ts` and registers its buffer here.
 *
 * @module
 */

import { viewBuffer } from "./dtype.ts";

/** What a copy needs of an arena whose memory it reads. */
export interface ArenaMemory {
  /** Address of the arena's first byte (pinned host memory). */
  readonly address: number;
  /** Keeps the arena's memory from being reset or freed; once per copy. */
  hold(): void;
  /** Ends a {@linkcode ArenaMemory.hold}. */
  release(): void;
}

// The arena's memory hangs on its buffer under a module-private symbol: one
// property load per leaf (two maps: ordinary buffers and arena buffers),
// where a WeakMap lookup per leaf cost 20-40 ns on the GPU hosts for every
// copy made while any arena existed. The buffer keeps it exactly as long as
// a WeakMap keyed on the buffer would.

const ARENA = Symbol("mtc.hostArena");
let registered = 0;

/** Records `buffer` as the memory of `arena`. */
export function registerArena(buffer: ArrayBufferLike, arena: ArenaMemory): void {
  Object.defineProperty(buffer, ARENA, { value: arena, configurable: true });
  registered++;
}

/** Forgets `buffer` (the arena was disposed). */
export function unregisterArena(buffer: ArrayBufferLike): void {
  if (!Object.hasOwn(buffer, ARENA)) return;
  // Not `delete`: a buffer the user froze keeps the entry (its views are
  // detached by then, and the walk refuses detached views) instead of throwing.
  Reflect.deleteProperty(buffer, ARENA);
  registered--;
}

/**
 * Forgets an arena whose buffer was collected without `dispose()` (its
 * entry went with the buffer; only the count is left to correct).
 */
export function arenaCollected(): void {
  registered--;
}

/**
 * The arena whose memory `view` lies in, if any. Free when no arena exists
 * (one comparison), so copies that use none pay nothing for the feature.
 */
export function arenaOf(view: ArrayBufferView): ArenaMemory | undefined {
  if (registered === 0) return undefined;
  // The engine's buffer, not the view's `buffer` property (which a subclass
  // or an own property could point at an arena the view does not lie in).
  const buffer = view instanceof DataView ? dataViewBuffer.call(view) : viewBuffer(view);
  return (buffer as { [ARENA]?: ArenaMemory })[ARENA];
}

const dataViewBuffer = Object.getOwnPropertyDescriptor(DataView.prototype, "buffer")!.get!;
