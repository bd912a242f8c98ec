import assert from "node:assert/strict";
import { DONE, type EventOps, FAILED, PENDING, WorkState } from "../../src/gpu/work_state.ts";

// A work's states over injected event operations: the event's status is
// what the test says, and the test counts what the state gives back.

interface Fake extends EventOps {
  now: number;
  waited: number;
  released: number[];
  waitWith: number;
}

function fakeOps(): Fake {
  return {
    now: -1,
    waited: 0,
    released: [],
    waitWith: 0,
    status() {
      return this.now;
    },
    synchronize() {
      this.waited++;
      return Promise.resolve(this.waitWith);
    },
    release(_device, event) {
      this.released.push(event);
    },
  };
}

function counter(): { release(): void; count: number } {
  return {
    count: 0,
    release() {
      this.count++;
    },
  };
}

Deno.test("WorkState.ready() asks the event until it completes, then releases event, holds and onSettle once", () => {
  const ops = fakeOps();
  const held = counter();
  let settled = 0;
  const state = new WorkState(0, 42, "a test launch", [held], () => void settled++, ops);
  assert.equal(state.ready(), false);
  assert.equal(state.state, PENDING);
  ops.now = 0;
  assert.equal(state.ready(), true);
  assert.equal(state.ready(), true);
  assert.equal(state.state, DONE);
  assert.deepEqual(ops.released, [42]);
  assert.equal(held.count, 1);
  assert.equal(settled, 1);
});

Deno.test("WorkState: a failed event is a CudaError naming what completed, and done() rejects with it", async () => {
  const ops = fakeOps();
  ops.now = 719;
  const state = new WorkState(0, 5, "a test launch", undefined, undefined, ops);
  assert.equal(state.ready(), true);
  assert.equal(state.state, FAILED);
  assert.match(String((state.error as Error).message), /^Cannot complete a test launch: /);
  assert.equal((state.error as { code: number }).code, 719);
  await assert.rejects(state.done(), (e) => e === state.error);
  assert.deepEqual(ops.released, [5]);
});

Deno.test("WorkState.done() waits off the event loop once, and is the same Promise on every call", async () => {
  const ops = fakeOps();
  const held = counter();
  const state = new WorkState(0, 9, "a test launch", [held], undefined, ops);
  const done = state.done();
  assert.equal(state.done(), done);
  await done;
  assert.equal(ops.waited, 1);
  assert.equal(state.state, DONE);
  assert.equal(held.count, 1);
  assert.deepEqual(ops.released, [9]);
});

Deno.test("WorkState.hold() holds until the work settles, and refuses once it has", () => {
  const ops = fakeOps();
  const state = new WorkState(0, 3, "a test launch", undefined, undefined, ops);
  const early = counter();
  assert.equal(state.hold(early), true);
  ops.now = 0; // completed meanwhile: hold() finds out and settles it
  const late = counter();
  assert.equal(state.hold(late), false);
  assert.equal(early.count, 1);
  assert.equal(late.count, 0); // not taken: the caller releases its own
});

Deno.test("WorkState not queued yet: pending without asking the event, queued once issued", async () => {
  const ops = fakeOps();
  ops.now = 0;
  const state = new WorkState(0, 0, "a test launch", undefined, undefined, ops);
  assert.equal(state.ready(), false); // no event to ask yet
  const whenQueued = state.whenQueued();
  assert.ok(whenQueued instanceof Promise);
  const done = state.done();
  state.issue(11);
  await whenQueued;
  assert.equal(state.whenQueued(), undefined);
  await state.queued();
  await done;
  assert.equal(state.state, DONE);
  assert.deepEqual(ops.released, [11]);
});

Deno.test("WorkState.fail() before it is queued: settled, holds released, queued() and done() reject", async () => {
  const ops = fakeOps();
  const held = counter();
  let settled = 0;
  const state = new WorkState(0, 0, "a test launch", [held], () => void settled++, ops);
  const whenQueued = state.whenQueued()!;
  const error = new Error("the copy it waited for failed");
  state.fail(error);
  await whenQueued; // resolves: it never rejects
  assert.equal(state.whenQueued(), undefined);
  await assert.rejects(state.queued(), (e) => e === error);
  await assert.rejects(state.done(), (e) => e === error);
  assert.equal(held.count, 1);
  assert.equal(settled, 1);
  assert.deepEqual(ops.released, []); // there was no event
});
