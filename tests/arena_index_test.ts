import assert from "node:assert/strict";
import {
  arenaCollected,
  type ArenaMemory,
  arenaOf,
  registerArena,
  unregisterArena,
} from "../src/arena_index.ts";

function memoryAt(address: number): ArenaMemory & { holds: number } {
  return {
    address,
    holds: 0,
    hold() {
      this.holds++;
    },
    release() {
      this.holds--;
    },
  };
}

Deno.test("arenaOf() finds the arena of every view of a registered buffer, and of no other", () => {
  const buffer = new ArrayBuffer(64);
  const memory = memoryAt(4096);
  registerArena(buffer, memory);
  try {
    assert.equal(arenaOf(new Float32Array(buffer, 16, 4)), memory);
    assert.equal(arenaOf(new Uint8Array(buffer)), memory);
    assert.equal(arenaOf(new DataView(buffer, 8)), memory);
    assert.equal(arenaOf(new Float32Array(16)), undefined);
  } finally {
    unregisterArena(buffer);
  }
});

Deno.test("unregisterArena() forgets the buffer; a second call changes nothing", () => {
  const gone = new ArrayBuffer(16);
  const kept = new ArrayBuffer(16);
  const memory = memoryAt(1);
  registerArena(gone, memoryAt(2));
  registerArena(kept, memory);
  try {
    unregisterArena(gone);
    unregisterArena(gone);
    assert.equal(arenaOf(new Uint8Array(gone)), undefined);
    // The count of arenas stayed right: the other arena is still found.
    assert.equal(arenaOf(new Uint8Array(kept)), memory);
  } finally {
    unregisterArena(kept);
  }
});

Deno.test("the entry on the buffer is not enumerable: spreading the buffer does not carry it", () => {
  const buffer = new ArrayBuffer(8);
  registerArena(buffer, memoryAt(8));
  try {
    assert.equal(Object.getOwnPropertySymbols(buffer).length, 1);
    assert.deepEqual(Object.getOwnPropertySymbols({ ...buffer }), []);
  } finally {
    unregisterArena(buffer);
  }
});

Deno.test("arenaCollected() takes a collected arena off the count: with none left, lookups read no buffer", () => {
  const live = new ArrayBuffer(8);
  const memory = memoryAt(16);
  registerArena(live, memory);
  const entry = Object.getOwnPropertySymbols(live)[0];
  // A second arena whose buffer was collected: its entry went with it.
  const collected = new ArrayBuffer(8);
  registerArena(collected, memoryAt(32));
  Reflect.deleteProperty(collected, entry);
  arenaCollected();
  assert.equal(arenaOf(new Uint8Array(live)), memory);
  unregisterArena(live);
  // No arena is left, so even a buffer that carries an entry is not read
  // (the one comparison that keeps copies without arenas free).
  const stale = new ArrayBuffer(8);
  Object.defineProperty(stale, entry, { value: memory, configurable: true });
  assert.equal(arenaOf(new Uint8Array(stale)), undefined);
});
