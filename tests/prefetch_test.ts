import assert from "node:assert/strict";
import { prefetch, Tensor } from "../mod.ts";

function batches(count: number, log: number[] = []): Iterable<{ ids: Int32Array }> {
  return {
    *[Symbol.iterator]() {
      for (let i = 0; i < count; i++) {
        log.push(i);
        yield { ids: new Int32Array([i, i + 1]) };
      }
    },
  };
}

async function* asyncBatches(count: number, failAt = -1) {
  for (let i = 0; i < count; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (i === failAt) throw new Error(`source failed at ${i}`);
    yield { ids: new Int32Array([i]) };
  }
}

Deno.test("prefetch() yields every batch in source order, as tensors on the device, from sync and async sources", async () => {
  const seen: number[] = [];
  for await (const batch of prefetch(batches(5), "cpu")) {
    assert.ok(batch.ids instanceof Tensor);
    seen.push(batch.ids.toTypedArray()[0] as number);
  }
  assert.deepEqual(seen, [0, 1, 2, 3, 4]);
  const fromAsync: number[] = [];
  for await (const batch of prefetch(asyncBatches(3), "cpu")) {
    fromAsync.push(batch.ids.toTypedArray()[0] as number);
  }
  assert.deepEqual(fromAsync, [0, 1, 2]);
});

Deno.test("prefetch() keeps depth batches in flight beyond the one in use", async () => {
  for (const depth of [1, 2, 4]) {
    const pulled: number[] = [];
    let step = 0;
    for await (const _ of prefetch(batches(8, pulled), "cpu", { depth })) {
      // The loop body's own awaits give the refill its turn.
      await new Promise((resolve) => setTimeout(resolve, 0));
      assert.equal(pulled.length, Math.min(step + 1 + depth, 8), `depth ${depth}, step ${step}`);
      step++;
    }
    assert.equal(step, 8);
  }
});

Deno.test("an error of the source surfaces at its iteration, after the batches before it", async () => {
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const batch of prefetch(asyncBatches(5, 2), "cpu", { depth: 3 })) {
      seen.push(batch.ids.toTypedArray()[0] as number);
    }
  }, /source failed at 2/);
  assert.deepEqual(seen, [0, 1]);
});

Deno.test("a batch that startCopy rejects surfaces at its own iteration", async () => {
  const cyclic: Record<string, unknown> = { ids: new Int32Array(1) };
  cyclic.self = cyclic;
  const source = [{ ids: new Int32Array([7]) }, cyclic, { ids: new Int32Array([9]) }];
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const batch of prefetch(source, "cpu")) {
      seen.push((batch.ids as Tensor).toTypedArray()[0] as number);
    }
  }, (error: unknown) => error instanceof TypeError && /cyclic/.test(error.message));
  assert.deepEqual(seen, [7]);
});

Deno.test("leaving the loop closes the source and stops pulling", async () => {
  let closed = false;
  let pulled = 0;
  async function* source() {
    try {
      for (let i = 0; i < 100; i++) {
        pulled++;
        yield { ids: new Int32Array([i]) };
      }
    } finally {
      closed = true;
    }
  }
  for await (const batch of prefetch(source(), "cpu", { depth: 2 })) {
    if ((batch.ids.toTypedArray()[0] as number) === 3) break;
  }
  assert.equal(closed, true);
  assert.equal(pulled, 6); // batches 0..3 used, 4 and 5 in flight
});

Deno.test("disposePrevious disposes each result when the next is taken, and the last at the end", async () => {
  const results: Tensor[] = [];
  for await (const batch of prefetch(batches(3), "cpu", { disposePrevious: true })) {
    assert.ok(results.every((t) => t.disposed));
    assert.equal(batch.ids.disposed, false);
    results.push(batch.ids);
  }
  assert.ok(results.every((t) => t.disposed));
  const kept: Tensor[] = [];
  for await (const batch of prefetch(batches(3), "cpu")) kept.push(batch.ids);
  assert.ok(kept.every((t) => !t.disposed));
});

Deno.test("prefetch() rejects a bad depth, device or option at once", () => {
  for (const depth of [0, -1, 1.5, NaN]) {
    assert.throws(() => prefetch([], "cpu", { depth }), RangeError);
  }
  assert.throws(() => prefetch([], "gpu"), TypeError);
  assert.throws(() => prefetch([], "cpu", { maxPackedChunkBytes: 0 }), RangeError);
});
