import assert from "node:assert/strict";
import { createCopyHandle } from "../src/copy_handle.ts";
import type { CopyJob, EventOps } from "../src/copy_job.ts";
import { CudaError } from "../mod.ts";

/** Events that complete after `pendingPolls` status queries, or fail with `failWith`. */
function fakeEvents({ pendingPolls = 0, failWith = 0 } = {}) {
  const log = { polls: 0, waits: 0, released: [] as number[] };
  let done = false;
  const ops: EventOps = {
    status() {
      log.polls++;
      if (failWith) return failWith;
      if (!done && log.polls > pendingPolls) done = true;
      return done ? 0 : -1;
    },
    wait() {
      log.waits++;
      done = true;
      return Promise.resolve(failWith);
    },
    release(_, event) {
      log.released.push(event);
    },
  };
  return { ops, log };
}

function job<R>(
  ops: EventOps,
  result: R,
  extra: Partial<CopyJob<R>> = {},
): CopyJob<R> & { calls: string[] } {
  const calls: string[] = [];
  return {
    eventOps: ops,
    events: [{ device: 0, event: 7 }],
    stats: { tensors: 1, bytes: 4, packedTensors: 0, chunks: 0, copies: 1 },
    complete: () => {
      calls.push("complete");
      return result;
    },
    abort: (error?: unknown) => {
      calls.push(`abort ${error instanceof Error ? error.message : error}`);
    },
    calls,
    ...extra,
  };
}

Deno.test("a handle is not ready while its events are pending, then completes once and releases them", async () => {
  const { ops, log } = fakeEvents({ pendingPolls: 3 });
  const work = job(ops, "result");
  const handle = createCopyHandle(work);
  assert.equal(handle.ready(), false);
  assert.equal(await handle.get(), "result");
  assert.equal(handle.ready(), true);
  assert.equal(await handle.get(), "result");
  assert.deepEqual(work.calls, ["complete"]);
  assert.deepEqual(log.released, [7]);
});

Deno.test("get() waits off the main thread when polling does not see the events complete", async () => {
  const { ops, log } = fakeEvents({ pendingPolls: Infinity });
  const handle = createCopyHandle(job(ops, 42));
  assert.equal(await handle.get(), 42);
  assert.equal(log.waits, 1);
});

Deno.test("a failed event rejects get() with a CudaError naming it, aborts once and completes never", async () => {
  const { ops, log } = fakeEvents({ failWith: 700 });
  const work = job(ops, "never");
  const handle = createCopyHandle(work);
  assert.equal(handle.ready(), true);
  await assert.rejects(handle.get(), (error: unknown) => {
    assert.ok(error instanceof CudaError);
    assert.equal(error.code, 700);
    assert.match(error.message, /complete the copy/);
    return true;
  });
  assert.equal(work.calls.length, 1);
  assert.match(work.calls[0], /^abort Cannot complete the copy/);
  assert.deepEqual(log.released, []);
});

Deno.test("a failure while staging rejects get() with that failure and aborts the job", async () => {
  const { ops } = fakeEvents();
  const staging = Promise.withResolvers<void>();
  const work = job(ops, "never", { submitted: staging.promise });
  const handle = createCopyHandle(work);
  assert.equal(handle.ready(), false);
  staging.reject(new Error("staging failed"));
  await assert.rejects(handle.get(), /staging failed/);
  assert.deepEqual(work.calls, ["abort staging failed"]);
});

Deno.test("stats() returns a snapshot the caller cannot change the handle through", () => {
  const { ops } = fakeEvents();
  const handle = createCopyHandle(job(ops, 0));
  const stats = handle.stats();
  stats.tensors = 99;
  assert.equal(handle.stats().tensors, 1);
});
