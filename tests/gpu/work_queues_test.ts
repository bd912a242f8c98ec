import assert from "node:assert/strict";
import { StreamQueues } from "../../src/gpu/work_queues.ts";

// The queues of works in flight, with plain objects for works: a work is
// only asked whether it is ready (which, for a GpuWork, settles it).

/** A work whose readiness the test sets, counting how often it is asked. */
function work(ready = false): { ready(): boolean; done: boolean; asked: number } {
  return {
    done: ready,
    asked: 0,
    ready() {
      this.asked++;
      return this.done;
    },
  };
}

Deno.test("StreamQueues.reap() settles a stream's works oldest first, up to the first one still running", () => {
  const queues = new StreamQueues<ReturnType<typeof work>>();
  const [first, running, behind] = [work(true), work(false), work(true)];
  for (const w of [first, running, behind]) queues.add(w, 0, 0x100);
  queues.reap();
  assert.deepEqual([first.asked, running.asked, behind.asked], [1, 1, 0]);
  assert.equal(queues.size, 2);
  running.done = true;
  queues.reap();
  assert.deepEqual([first.asked, running.asked, behind.asked], [1, 2, 1]);
  assert.equal(queues.size, 0);
});

Deno.test("StreamQueues.reap() does not let a running work on one stream hold back another stream", () => {
  const queues = new StreamQueues<ReturnType<typeof work>>();
  const long = work(false);
  const other = work(true);
  queues.add(long, 0, 0x100);
  queues.add(other, 0, 0x200);
  const onDevice1 = work(true);
  queues.add(onDevice1, 1, 0x100); // same address, other device: another stream
  queues.reap();
  assert.equal(other.asked, 1);
  assert.equal(onDevice1.asked, 1);
  assert.equal(queues.size, 1);
});

Deno.test("StreamQueues.reap(true) asks every work, also those behind a running one", () => {
  const queues = new StreamQueues<ReturnType<typeof work>>();
  const ws = [work(false), work(true), work(false)];
  for (const w of ws) queues.add(w, 0, 0x100);
  queues.reap(true);
  // The running one is asked again with the rest: every work is asked.
  assert.deepEqual(ws.map((w) => w.asked), [2, 1, 1]);
  assert.equal(queues.size, 3); // still held from the running one on
});

Deno.test("StreamQueues forgets an emptied stream: a later work on it starts a new queue", () => {
  const queues = new StreamQueues<ReturnType<typeof work>>();
  const a = work(true);
  queues.add(a, 0, 0x100);
  queues.reap();
  queues.reap();
  assert.equal(a.asked, 1); // settled once, then never asked again
  const b = work(false);
  queues.add(b, 0, 0x100);
  queues.reap();
  assert.equal(b.asked, 1);
  assert.equal(queues.size, 1);
});

Deno.test("StreamQueues keeps its order across the compaction of a long queue", () => {
  const queues = new StreamQueues<ReturnType<typeof work>>();
  const ws = Array.from({ length: 100 }, (_, i) => work(i < 70));
  for (const w of ws) queues.add(w, 0, 0x100);
  queues.reap(); // 70 settled: more than 64 and more than half, so the queue is cut
  assert.equal(queues.size, 30);
  ws[70].done = true;
  queues.reap();
  assert.equal(queues.size, 29);
  assert.equal(ws[71].asked, 1);
  assert.equal(ws[69].asked, 1);
});
