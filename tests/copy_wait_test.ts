import assert from "node:assert/strict";
import type { InFlightCopy } from "../src/copies_in_flight.ts";
import type { CopyJob, EventOps } from "../src/copy_job.ts";
import { type CopyWaitHooks, waitForCopy } from "../src/copy_wait.ts";

/**
 * A copy as the wait sees it: `ready()` is true from its `doneAtPoll`-th
 * call on (Infinity: never by polling), or once an off-thread wait answered
 * 0 for every event; the hooks read and change its state.
 */
function waitedCopy(
  {
    doneAtPoll = Infinity,
    waits = [] as number[],
    events = 1,
    submitted = undefined as
      | Promise<void>
      | undefined,
  } = {},
) {
  const log: string[] = [];
  let state: "pending" | "done" | "failed" = "pending";
  let failure: number | undefined;
  let polls = 0;
  let waited = 0;
  const copy: InFlightCopy = {
    ready(): boolean {
      log.push("ready");
      if (state !== "pending") return true;
      if (++polls >= doneAtPoll || waited >= events) state = "done";
      return state === "done";
    },
  };
  const ops: EventOps = {
    status: () => {
      throw new Error("the wait asks ready(), not the events");
    },
    wait(device, event) {
      log.push(`wait ${device}:${event}`);
      const status = waits.length > 0 ? waits.shift()! : 0;
      if (status === 0) waited++;
      return Promise.resolve(status);
    },
    release: () => {},
  };
  const hooks: CopyWaitHooks = {
    pending: (c) => (assert.equal(c, copy), state === "pending"),
    fail(c, status) {
      assert.equal(c, copy);
      log.push(`fail ${status}`);
      state = "failed";
      failure = status;
    },
    outcome(c) {
      assert.equal(c, copy);
      if (state === "failed") throw new Error(`failed with ${failure}`);
      return "result";
    },
  };
  const job: CopyJob<string> = {
    events: Array.from({ length: events }, (_, i) => ({ device: i, event: 10 + i })),
    stats: { tensors: 1, bytes: 4, packedTensors: 0, chunks: 0, copies: 1 },
    submitted,
    complete: () => "result",
    abort: () => {},
  };
  return { copy, ops, hooks, job, log, setState: (s: typeof state) => state = s };
}

Deno.test("a copy expected to take longer than the poll cap is polled for at most MAX_SPIN_MICROSECONDS, then waited for off-thread", async () => {
  const { ops, job, log } = waitedCopy();
  // At the assumed 20 GB/s, these bytes are expected to take ~14 hours.
  job.stats.bytes = 1e15;
  // Polls are counted, not logged; a copy still polled past 100 million
  // polls (seconds of polling) reports done, so that a missing cap fails
  // this test (no off-thread wait in the log) instead of hanging it.
  let polls = 0;
  let waitedFor = false;
  const copy = {
    ready(): boolean {
      if (waitedFor) return true;
      return ++polls >= 1e8;
    },
  };
  const waiting = { ...ops, wait: (d: number, e: number) => (waitedFor = true, ops.wait(d, e)) };
  const capped: CopyWaitHooks = {
    pending: () => !waitedFor && polls < 1e8,
    fail: () => assert.fail("no wait failed"),
    outcome: () => "result",
  };
  assert.equal(await waitForCopy(copy, job, waiting, capped), "result");
  assert.ok(waitedFor, `waited for off-thread after ${polls} polls`);
  assert.deepEqual(log, ["wait 0:10"]);
});

Deno.test("waitForCopy() resolves with the outcome once a poll sees the copy done, with no off-thread wait", async () => {
  const { copy, ops, hooks, job, log } = waitedCopy({ doneAtPoll: 1 });
  assert.equal(await waitForCopy(copy, job, ops, hooks), "result");
  assert.deepEqual(log, ["ready"]);
});

Deno.test("waitForCopy() returns at once and polls only after a microtask", async () => {
  const { copy, ops, hooks, job, log } = waitedCopy({ doneAtPoll: 1 });
  const waiting = waitForCopy(copy, job, ops, hooks);
  // The caller's code goes on before the first poll (Promise.all over two
  // devices starts the second copy before the first is polled for).
  assert.deepEqual(log, []);
  assert.equal(await waiting, "result");
});

Deno.test("a copy still running after the polls is waited for off-thread, event by event, then asked again", async () => {
  const { copy, ops, hooks, job, log } = waitedCopy({ events: 2 });
  assert.equal(await waitForCopy(copy, job, ops, hooks), "result");
  // Polled at least once before the waits; asked once more after them.
  const firstWait = log.indexOf("wait 0:10");
  assert.ok(firstWait > 0 && log.slice(0, firstWait).every((entry) => entry === "ready"));
  assert.deepEqual(log.slice(firstWait), ["wait 0:10", "wait 1:11", "ready"]);
});

Deno.test("an off-thread wait that answers a CUDA status fails the copy with it, and the Promise rejects", async () => {
  const { copy, ops, hooks, job, log } = waitedCopy({ waits: [700] });
  await assert.rejects(waitForCopy(copy, job, ops, hooks), { message: "failed with 700" });
  assert.ok(log.includes("wait 0:10"));
  assert.ok(log.includes("fail 700"));
});

Deno.test("a copy that settled while it was being queued is neither polled nor waited for", async () => {
  let queue!: () => void;
  const submitted = new Promise<void>((resolve) => queue = resolve);
  const { copy, ops, hooks, job, log, setState } = waitedCopy({ submitted });
  const waiting = waitForCopy(copy, job, ops, hooks);
  setState("done");
  queue();
  assert.equal(await waiting, "result");
  assert.deepEqual(log, []);
});

Deno.test("a submission that rejects does not reject the wait: the copy's own outcome does", async () => {
  const submitted = Promise.reject(new Error("staging failed"));
  const { copy, ops, hooks, job, setState } = waitedCopy({ submitted });
  setState("failed");
  await assert.rejects(waitForCopy(copy, job, ops, hooks), { message: "failed with undefined" });
});
