/**
 * Which ArrayBuffers are host arenas' memory: the route asks it for each
 * CPU leaf, so that a tensor that already lies in pinned memory is sent from
 * where it is. Pure bookkeeping (no FFI): the arena itself lives in
 * `memory/host_arena.ts` and registers its buffer here.
 *
 * @module
 */

/** What a copy needs of an arena whose memory it reads. */
export interface ArenaMemory {
  /** Address of the arena's first byte (pinned host memory). */
  readonly address: number;
  /** Keeps the arena's memory from being reset or freed; once per copy. */
  hold(): void;
  /** Ends a {@linkcode ArenaMemory.hold}. */
  release(): void;
}

const arenas = new WeakMap<ArrayBufferLike, ArenaMemory>();
let registered = 0;

/** Records `buffer` as the memory of `arena`. */
export function registerArena(buffer: ArrayBufferLike, arena: ArenaMemory): void {
  arenas.set(buffer, arena);
  registered++;
}

/** Forgets `buffer` (the arena was disposed). */
export function unregisterArena(buffer: ArrayBufferLike): void {
  if (arenas.delete(buffer)) registered--;
  if (lastBuffer !== undefined && buffer === lastBuffer.deref()) {
    lastBuffer = undefined;
    lastArena = undefined;
  }
}

/** Whether any arena exists (the route asks before looking a leaf up). */
export function arenasExist(): boolean {
  return registered !== 0;
}

/**
 * The arena whose memory `view` lies in, if any. Free when no arena exists
 * (one comparison), so copies that use none pay nothing for the feature.
 */
export function arenaOf(view: ArrayBufferView): ArenaMemory | undefined {
  if (registered === 0) return undefined;
  // A batch's leaves share their arena's buffer: one comparison each.
  const buffer = view.buffer;
  if (lastBuffer !== undefined && buffer === lastBuffer.deref()) return lastArena;
  const arena = arenas.get(buffer);
  if (arena !== undefined) {
    lastBuffer = new WeakRef(buffer);
    lastArena = arena;
  }
  return arena;
}

// The last buffer found, held weakly: a dropped arena must still be freed.
let lastBuffer: WeakRef<ArrayBufferLike> | undefined;
let lastArena: ArenaMemory | undefined;
