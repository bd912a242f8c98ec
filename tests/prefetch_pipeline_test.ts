import assert from "node:assert/strict";
import type { Tensor } from "../mod.ts";
import { prefetchBatches, type PrefetchRun } from "../src/prefetch_pipeline.ts";

// The pipeline with its arguments resolved (prefetch() checks them first,
// tests/prefetch_test.ts): what it pulls, keeps in flight, yields and disposes.

const run = (depth: number, disposePrevious = false): PrefetchRun => ({
  device: "cpu",
  depth,
  disposePrevious,
  copyOptions: {},
});

/** A sync source of `count` batches `{ ids: [i] }`, logging each pull and whether it was opened and closed. */
function source(count: number) {
  const log: string[] = [];
  const open = () => {
    log.push("open");
    let i = 0;
    const iterator: Iterator<{ ids: Int32Array }> = {
      next() {
        if (i === count) return { done: true, value: undefined };
        log.push(`pull ${i}`);
        return { done: false, value: { ids: new Int32Array([i++]) } };
      },
      return() {
        log.push("close");
        return { done: true, value: undefined };
      },
    };
    return { iterator, sync: true };
  };
  return { open, log };
}

Deno.test("prefetchBatches() yields the copies in source order and closes nothing it exhausted", async () => {
  const { open, log } = source(4);
  const seen: number[] = [];
  for await (const batch of prefetchBatches(open, run(2))) {
    assert.equal((batch.ids as Tensor).device, "cpu");
    seen.push((batch.ids as Tensor).toTypedArray()[0] as number);
  }
  assert.deepEqual(seen, [0, 1, 2, 3]);
  assert.equal(log.filter((entry) => entry === "open").length, 1);
  assert.ok(!log.includes("close"));
});

Deno.test("prefetchBatches() opens its source at the first step, not before", async () => {
  const { open, log } = source(1);
  const batches = prefetchBatches(open, run(1));
  assert.deepEqual(log, []);
  await batches.next();
  assert.equal(log[0], "open");
  await batches.return();
});

Deno.test("prefetchBatches() keeps depth copies started beyond the batch in use, and no more", async () => {
  for (const depth of [1, 3]) {
    const { open, log } = source(10);
    const batches = prefetchBatches(open, run(depth));
    await batches.next();
    // Let the pump run: it stops once depth copies wait behind the batch in use.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(
      log.filter((entry) => entry.startsWith("pull")).length,
      1 + depth,
      `depth ${depth}`,
    );
    await batches.return();
    assert.equal(log.at(-1), "close");
  }
});

Deno.test("with disposePrevious a result is disposed when the next is taken, else it stays live", async () => {
  for (const disposePrevious of [true, false]) {
    const { open } = source(2);
    const results: Tensor[] = [];
    for await (const batch of prefetchBatches(open, run(1, disposePrevious))) {
      results.push(batch.ids as Tensor);
      assert.equal(results.at(-1)!.disposed, false);
    }
    assert.deepEqual(results.map((tensor) => tensor.disposed), [disposePrevious, disposePrevious]);
    if (!disposePrevious) { for (const tensor of results) tensor.dispose(); }
  }
});

Deno.test("leaving the loop early disposes the result in use and closes the source once", async () => {
  const { open, log } = source(5);
  const batches = prefetchBatches(open, run(3, true));
  const first = await batches.next();
  const taken = (first.value as { ids: Tensor }).ids;
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 0));
  await batches.return();
  assert.equal(taken.disposed, true);
  assert.deepEqual(log.filter((entry) => entry === "close"), ["close"]);
  // No pull after the close: the pipeline starts no copy once left.
  assert.equal(log.at(-1), "close");
});

Deno.test("an error of the source surfaces at the step of its batch, after the batches before it", async () => {
  const open = () => ({
    iterator: (function* () {
      yield { ids: new Int32Array([0]) };
      throw new Error("source failed");
    })(),
    sync: true,
  });
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const batch of prefetchBatches(open, run(2, true))) {
      seen.push((batch.ids as Tensor).toTypedArray()[0] as number);
    }
  }, { message: "source failed" });
  assert.deepEqual(seen, [0]);
});
