import assert from "node:assert/strict";
import { arenaOf } from "../../src/arena_index.ts";
import { deviceCount } from "../../src/device.ts";
import {
  allocateArena,
  arenaMemory,
  checkArenaIdle,
  freeArena,
} from "../../src/memory/arena_memory.ts";
import { hasGpu } from "../gpu/_helpers.ts";

Deno.test({
  name: "without a usable GPU an arena's memory is ordinary, uncounted and not registered",
  ignore: deviceCount() > 0,
  fn() {
    const before = arenaMemory();
    const backing = allocateArena(256, { inFlight: 0 });
    assert.equal(backing.address, 0);
    assert.equal(backing.buffer.byteLength, 256);
    assert.deepEqual(arenaMemory(), before);
    // Copies send its views as any TypedArray: no arena to hold.
    assert.equal(arenaOf(new Float32Array(backing.buffer)), undefined);
    freeArena(backing, 256);
    assert.deepEqual(arenaMemory(), before);
  },
});

Deno.test("freeArena() empties every view before the memory goes", () => {
  const backing = allocateArena(64, { inFlight: 0 });
  const view = new Float32Array(backing.buffer, 16, 4);
  freeArena(backing, 64);
  assert.equal(backing.buffer.detached, true);
  assert.equal(view.length, 0);
});

Deno.test("freeArena() gives up memory whose buffer the user moved away, and the moved buffer keeps its bytes", () => {
  // Freed at once, the pinned memory was unmapped under `moved` (a crash
  // on reading it) or handed to the next allocation; the shim parks it
  // until `moved` is gone.
  const backing = allocateArena(64, { inFlight: 0 });
  new Uint8Array(backing.buffer).fill(7);
  const before = arenaMemory();
  const moved = backing.buffer.transfer();
  freeArena(backing, 64);
  assert.equal(arenaMemory().arenas, before.arenas - (backing.address === 0 ? 0 : 1));
  const again = allocateArena(64, { inFlight: 0 });
  new Uint8Array(again.buffer).fill(9);
  assert.deepEqual(new Uint8Array(moved), new Uint8Array(64).fill(7));
  freeArena(again, 64);
});

Deno.test("checkArenaIdle() passes with no copy in flight and names how many read the arena otherwise", () => {
  checkArenaIdle({ inFlight: 0 }, "reset");
  assert.throws(() => checkArenaIdle({ inFlight: 2 }, "dispose"), {
    name: "Error",
    message:
      "Cannot dispose a hostArena that 2 copies in flight still read; await their get() first",
  });
  assert.throws(() => checkArenaIdle({ inFlight: 1 }, "reset"), { message: /^Cannot reset a / });
});

Deno.test({
  name:
    "on a GPU an arena's memory is pinned, counted, and registered with holds that count its copies",
  ignore: !hasGpu,
  fn() {
    const before = arenaMemory();
    const copies = { inFlight: 0 };
    const backing = allocateArena(4096, copies);
    assert.notEqual(backing.address, 0);
    assert.deepEqual(arenaMemory(), {
      arenas: before.arenas + 1,
      bytes: before.bytes + 4096,
    });
    const memory = arenaOf(new Uint8Array(backing.buffer, 32, 8));
    assert.equal(memory?.address, backing.address);
    memory!.hold();
    memory!.hold();
    assert.equal(copies.inFlight, 2);
    memory!.release();
    memory!.release();
    assert.equal(copies.inFlight, 0);
    freeArena(backing, 4096);
    assert.deepEqual(arenaMemory(), before);
    assert.equal(arenaOf(new Uint8Array(8)), undefined);
  },
});
