import assert from "node:assert/strict";
import { byOffset, orderByOffset } from "../../src/transfer/from_arena.ts";

function isOrdered(offsets: Float64Array, order: ArrayLike<number>): boolean {
  const seen = new Set<number>();
  for (let i = 0; i < order.length; i++) {
    seen.add(order[i]);
    if (i > 0 && offsets[order[i]] < offsets[order[i - 1]]) return false;
  }
  return seen.size === offsets.length;
}

Deno.test("byOffset() orders a little out of order list (the insertion sort's case)", () => {
  // Each sample's ids and flags were allocated before its boxes.
  const offsets = new Float64Array(
    Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? i + 2 : i - 1) * 16),
  );
  assert.ok(isOrdered(offsets, byOffset(offsets, offsets.length)));
});

Deno.test("byOffset() orders a reversed list (past the insertion sort's budget) and keeps ties stable", () => {
  const offsets = new Float64Array(Array.from({ length: 5000 }, (_, i) => (5000 - i) * 16));
  assert.ok(isOrdered(offsets, byOffset(offsets, offsets.length)));
  const ties = new Float64Array([32, 16, 16, 0, 16]);
  assert.deepEqual(Array.from(byOffset(ties, 5)), [3, 1, 2, 4, 0]);
});

Deno.test("byOffset() orders offsets of arenas past 4 GiB (the comparator's case)", () => {
  const offsets = new Float64Array(Array.from({ length: 2000 }, (_, i) => (2000 - i) * 2 ** 23));
  assert.ok(isOrdered(offsets, byOffset(offsets, offsets.length)));
});

Deno.test("orderByOffset() reuses the last copy's order while it still sorts the offsets", () => {
  // Each sample's ids before its boxes, then the next batch with other lengths, same order.
  const batch = (scale: number) =>
    new Float64Array(Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? i + 2 : i - 1) * scale));
  const first = orderByOffset(batch(16), 300);
  assert.ok(isOrdered(batch(16), first));
  assert.equal(orderByOffset(batch(32), 300), first);
  // In the walk's order: no sort and no cached order.
  const inOrder = new Float64Array(Array.from({ length: 300 }, (_, i) => i * 16));
  assert.deepEqual(
    Array.from(orderByOffset(inOrder, 300)),
    Array.from({ length: 300 }, (_, i) => i),
  );
  // A changed order is sorted again, ties by position.
  const ties = new Float64Array([32, 16, 16, 0, 16]);
  assert.deepEqual(Array.from(orderByOffset(ties, 5)), [3, 1, 2, 4, 0]);
  const reordered = new Float64Array([32, 16, 48, 0, 16]);
  assert.deepEqual(Array.from(orderByOffset(reordered, 5)), [3, 1, 4, 0, 2]);
});
