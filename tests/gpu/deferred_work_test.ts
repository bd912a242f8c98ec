import assert from "node:assert/strict";
import { deferWork, tailWork } from "../../src/gpu/deferred_work.ts";

// Work not queued yet, on its CPU side: it is the stream's tail until its
// `ready` settles, and a queue that throws fails it. (Queued deferred work
// needs a GPU: tests/gpu/not_queued_test.ts.)

function never(): Promise<void> {
  return new Promise<void>(() => {});
}

Deno.test("deferWork(): the work is its stream's tail at once, and a later one on that stream replaces it", async () => {
  let release!: () => void;
  const ready = new Promise<void>((resolve) => release = resolve);
  const first = deferWork(0, 0x7001, "the first", ready, () => {
    throw new Error("not queued in this test");
  });
  assert.equal(tailWork(0, 0x7001), first);
  assert.equal(tailWork(0, 0x7002), undefined);
  assert.equal(tailWork(1, 0x7001), undefined);
  assert.equal(first.ready(), false);
  assert.equal(Deno.inspect(first), "GpuWork(the first, pending)");
  const second = deferWork(0, 0x7001, "the second", never(), () => 1);
  assert.equal(tailWork(0, 0x7001), second);
  release();
  await assert.rejects(first.queued(), { message: "not queued in this test" });
  assert.equal(tailWork(0, 0x7001), second); // the first settling leaves the second the tail
});

Deno.test("deferWork(): a queue that throws fails the work, releases its holds once and calls onSettle", async () => {
  let released = 0;
  let settled = 0;
  const error = new Error("the launch was refused");
  const work = deferWork(
    0,
    0x7003,
    "a refused launch",
    Promise.resolve(),
    () => {
      throw error;
    },
    [{ release: () => void released++ }],
    () => void settled++,
  );
  await assert.rejects(work.queued(), (e) => e === error);
  await assert.rejects(work.done(), (e) => e === error);
  assert.ok(work.ready());
  assert.equal(tailWork(0, 0x7003), undefined);
  assert.equal(released, 1);
  assert.equal(settled, 1);
  assert.equal(Deno.inspect(work), "GpuWork(a refused launch, failed)");
});

Deno.test("deferWork(): nothing is queued before `ready` settles", async () => {
  let queued = 0;
  let release!: () => void;
  const ready = new Promise<void>((resolve) => release = resolve);
  const work = deferWork(0, 0x7004, "a waiting launch", ready, () => {
    queued++;
    throw new Error("stop here: no GPU");
  });
  await Promise.resolve();
  assert.equal(queued, 0);
  release();
  await work.queued().catch(() => {});
  assert.equal(queued, 1);
});
