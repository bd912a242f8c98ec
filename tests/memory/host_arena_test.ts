import assert from "node:assert/strict";
import { deviceCount, HostArena, hostArena, memoryStats, startCopy } from "../../mod.ts";
import { ARENA_ALIGNMENT } from "../../src/memory/arena_views.ts";

// These hold on every machine: pinned memory where a GPU is usable, ordinary
// memory elsewhere. tests/gpu/host_arena_test.ts covers the copies.

Deno.test("hostArena() hands out views front to back, each at a multiple of 16 bytes", () => {
  using arena = hostArena(1024);
  assert.equal(arena.pinned, deviceCount() > 0);
  const a = arena.uint8(3);
  const b = arena.float64(2);
  const c = arena.int32(5);
  assert.deepEqual([a.byteOffset, b.byteOffset, c.byteOffset], [0, 16, 32]);
  assert.ok([a, b, c].every((view) => view.byteOffset % ARENA_ALIGNMENT === 0));
  assert.equal(arena.usedBytes, 52);
  assert.ok(a.buffer === b.buffer && b.buffer === c.buffer);
  assert.ok(arena.int64(1) instanceof BigInt64Array);
  assert.ok(arena.array(Uint16Array, 4) instanceof Uint16Array);
});

Deno.test("hostArena() says how much did not fit, and reset() starts over", () => {
  using arena = hostArena(64);
  arena.float32(8);
  assert.throws(() => arena.float32(9), {
    name: "RangeError",
    message: /^Cannot carve 36 more bytes from the host arena: they do not fit \(32 of 64 used\)/,
  });
  arena.reset();
  assert.equal(arena.usedBytes, 0);
  assert.equal(arena.float32(16).byteOffset, 0);
});

Deno.test("hostArena() rejects sizes and lengths that are not whole numbers", () => {
  assert.throws(() => hostArena(0), RangeError);
  assert.throws(() => hostArena(1.5), RangeError);
  assert.throws(() => hostArena(NaN), RangeError);
  using arena = hostArena(64);
  assert.throws(() => arena.float32(-1), RangeError);
  assert.throws(() => arena.float32(0.5), RangeError);
});

Deno.test("dispose() empties every view and makes the arena unusable", () => {
  const arena = hostArena(256);
  const view = arena.float32(4);
  arena.dispose();
  assert.equal(view.length, 0);
  assert.throws(() => arena.float32(1), { message: "Cannot use a disposed hostArena" });
  // reset() of a disposed arena succeeded silently (and set usedBytes to 0).
  assert.throws(() => arena.reset(), { message: "Cannot use a disposed hostArena" });
  arena.dispose(); // twice is fine
});

Deno.test("views of an arena copy to the CPU like any TypedArray", async () => {
  using arena = hostArena(256);
  const boxes = arena.float32(4);
  boxes.set([1, 2, 3, 4]);
  const result = await startCopy({ boxes }, "cpu").get();
  assert.deepEqual(result.boxes.toTypedArray(), new Float32Array([1, 2, 3, 4]));
});

Deno.test("array() rejects a class that is not a TypedArray class, and hands out nothing", () => {
  using arena = hostArena(256);
  arena.uint8(3);
  const notTyped = [
    DataView,
    class ThreeBytes extends Uint8Array {
      static override readonly BYTES_PER_ELEMENT = 3;
    },
    // Claims an element size, makes something else.
    Object.assign(function Fake() {
      return new Uint8Array(4);
    }, { BYTES_PER_ELEMENT: 1 }),
  ];
  for (const cls of notTyped) {
    assert.throws(() => arena.array(cls as never, 4), {
      name: "TypeError",
      message: /Invalid hostArena class: expected a TypedArray class/,
    });
  }
  assert.equal(arena.usedBytes, 3);
  assert.equal(arena.float32(1).byteOffset, 16);
});

Deno.test("dispose() gives the arena up even after a view's buffer was transferred away", () => {
  // Memory a moved buffer still reaches is parked, not freed, until that
  // buffer is gone (tests/gpu/host_arena_test.ts): `movedAway` says so.
  const arenasOf = ({ arenas, arenaBytes }: ReturnType<typeof memoryStats>["outsidePools"]) => ({
    arenas,
    arenaBytes,
  });
  const before = arenasOf(memoryStats().outsidePools);
  for (const transfer of [(b: ArrayBuffer) => b.transfer(0), (b: ArrayBuffer) => b.transfer()]) {
    const arena = hostArena(4096);
    arena.float32(4).set([1, 2, 3, 4]);
    const moved = new Float32Array(transfer(arena.float32(4).buffer as ArrayBuffer));
    arena.dispose();
    assert.deepEqual(arenasOf(memoryStats().outsidePools), before);
    assert.throws(() => arena.float32(1), { message: "Cannot use a disposed hostArena" });
    assert.deepEqual([...moved.subarray(0, 4)], moved.length ? [1, 2, 3, 4] : []);
  }
});

Deno.test("hostArena() is the one way to make an arena: new HostArena() throws TypeError", () => {
  const construct = HostArena as unknown as new (bytes: number) => HostArena;
  assert.throws(() => new construct(1024), {
    name: "TypeError",
    message: /Cannot construct a HostArena directly: use hostArena\(bytes\)/,
  });
  using arena = hostArena(64);
  assert.ok(arena instanceof HostArena);
});

Deno.test("array() refuses a class that uses the arena while making its view: no two views share bytes", () => {
  using arena = hostArena(256);
  let inner: Float32Array | undefined;
  class Reentrant extends Float32Array {
    constructor(buffer: ArrayBuffer, offset: number, length: number) {
      super(buffer, offset, length);
      // Handed out the same bytes as the view being made, before the fix.
      inner ??= arena.float32(length);
    }
  }
  assert.throws(() => arena.array(Reentrant, 4), {
    name: "TypeError",
    message: /used the arena while it was making a view of it/,
  });
  const next = arena.float32(4);
  assert.ok(inner !== undefined);
  assert.ok(
    next.byteOffset >= inner.byteOffset + inner.byteLength,
    `a later view (at ${next.byteOffset}) overlaps the inner one`,
  );
});
