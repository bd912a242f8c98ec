/**
 * The queue of copies waiting for memory (src/transfer/admission_queue.ts), on
 * pools of fake memory and a clock the test moves: which copy starts when.
 */
import assert from "node:assert/strict";
import { CPU } from "../../src/device.ts";
import { BlockPool } from "../../src/memory/block_pool.ts";
import type { Block } from "../../src/memory/block_pool_types.ts";
import { MemoryLimitError } from "../../src/memory/limit_error.ts";
import { IndexList } from "../../src/number_list.ts";
import type { Route } from "../../src/route.ts";
import { submitWhenAdmitted } from "../../src/transfer/submit.ts";
import { createCopyHandle } from "../../src/copy_handle.ts";
import { type AdmissionDeps, AdmissionQueue } from "../../src/transfer/admission_queue.ts";
import type { AdmittedRoute } from "../../src/transfer/memory_needs.ts";

const WAIT_MS = 1000;

/** A pinned pool of `limitBytes` over fake memory, a clock and its timers. */
function fakeMemory(limitBytes: number) {
  let next = 4096;
  const pinned = new BlockPool({
    alloc(bytes: number): number {
      const address = next;
      next += bytes;
      return address;
    },
    free(_: Block): void {},
  }, { minBlockBytes: 1, limitBytes: () => limitBytes });
  let now = 0;
  let timers: { due: number; callback: () => void; id: number }[] = [];
  let nextTimer = 1;
  const deps: AdmissionDeps = {
    pinned: () => pinned,
    device: () => pinned,
    limits: () => ({ pinnedBytes: limitBytes, deviceBytes: limitBytes, waitMs: WAIT_MS }),
    now: () => now,
    setTimer(callback, delayMs) {
      timers.push({ due: now + delayMs, callback, id: nextTimer });
      return nextTimer++;
    },
    clearTimer(timer) {
      timers = timers.filter((t) => t.id !== timer);
    },
    reapFinished() {},
    nudgeCollector() {},
  };
  /** Moves the clock by `ms`, running the timers that fall due, then lets promises settle. */
  async function advance(ms: number): Promise<void> {
    const end = now + ms;
    // The queue backs off (1 ms doubling to POLL_MAX_MS): far fewer polls than this.
    for (let fired = 0;; fired++) {
      if (fired > 10_000) {
        throw new Error("Cannot advance the clock: the queue polls without pause");
      }
      timers.sort((a, b) => a.due - b.due);
      const timer = timers[0];
      if (timer === undefined || timer.due > end) break;
      timers.shift();
      now = Math.max(now, timer.due);
      timer.callback();
      await Promise.resolve();
    }
    now = end;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  return { pinned, queue: new AdmissionQueue(deps), advance };
}

/** A CUDA→CPU copy of `bytes` (all of it needs the pinned pool). */
function copyOf(bytes: number): AdmittedRoute {
  return {
    target: CPU,
    movedBytes: bytes,
    options: { usePinnedStaging: true, useBackgroundThread: true },
    h2d: new IndexList(),
    leaves: [],
  };
}

/** Records the order in which `copies` settle. */
function settleOrder(copies: Record<string, Promise<void> | undefined>): string[] {
  const order: string[] = [];
  for (const [name, admitted] of Object.entries(copies)) {
    admitted?.then(() => order.push(name), () => order.push(`${name} rejected`));
  }
  return order;
}

Deno.test("a copy that fits under the limit starts at once", () => {
  const { queue } = fakeMemory(1024);
  assert.equal(queue.admit(copyOf(1024)), undefined);
  assert.equal(queue.waiting, 0);
});

Deno.test("copies that wait start first-come: a small copy waits behind a large one", async () => {
  const { pinned, queue, advance } = fakeMemory(1024);
  const held = pinned.acquire(512);
  const large = queue.admit(copyOf(1024));
  const small = queue.admit(copyOf(256));
  assert.ok(large instanceof Promise, "the large copy does not fit while 512 bytes are in use");
  assert.ok(small instanceof Promise, "the small copy would fit, but queues behind the large one");
  const order = settleOrder({ large, small });

  await advance(10);
  assert.deepEqual(order, [], "nothing starts while the memory is in use");

  pinned.release(held);
  queue.memoryReleased();
  await advance(10);
  assert.deepEqual(order, ["large", "small"]);
});

Deno.test("a copy larger than the limit is rejected at once, without waiting", async () => {
  const { queue } = fakeMemory(1024);
  const admitted = queue.admit(copyOf(2048));
  assert.equal(queue.waiting, 0, "a copy that can never fit does not queue");
  await assert.rejects(admitted!, (error: unknown) => {
    assert.ok(error instanceof MemoryLimitError);
    assert.equal(error.neededBytes, 2048);
    assert.equal(error.limitBytes, 1024);
    assert.equal(error.waitedMs, undefined);
    return true;
  });
});

Deno.test("a copy still waiting after waitMs is rejected with a MemoryLimitError and leaves the queue", async () => {
  const { pinned, queue, advance } = fakeMemory(1024);
  pinned.acquire(1024);
  const admitted = queue.admit(copyOf(512))!;
  const order = settleOrder({ admitted });

  await advance(WAIT_MS - 1);
  assert.deepEqual(order, [], "it waits up to waitMs");
  assert.equal(queue.waiting, 1);

  await advance(1);
  assert.equal(queue.waiting, 0);
  await assert.rejects(admitted, (error: unknown) => {
    assert.ok(error instanceof MemoryLimitError);
    assert.equal(error.waitedMs, WAIT_MS);
    assert.equal(error.inUseBytes, 1024);
    return true;
  });
});

Deno.test("a copy that timed out waiting gives back the holds on its inputs and disposes its outputs", async () => {
  const { pinned, queue, advance } = fakeMemory(1024);
  pinned.acquire(1024);
  const log: string[] = [];
  // What the job of a waiting copy reads of its route (a stand-in: nothing is queued).
  const route = {
    ...copyOf(512),
    tensors: 1,
    bytes: 512,
    outputs: [{ dispose: () => log.push("dispose output") }],
    arenas: [{ hold: () => log.push("hold arena"), release: () => log.push("release arena") }],
    inputStorages: () => [
      { retain: () => log.push("retain input"), release: () => log.push("release input") },
    ],
    captureSources: () => {},
    releaseLists: () => log.push("release lists"),
  } as unknown as Route;
  const handle = createCopyHandle(submitWhenAdmitted(route, queue.admit(route)!));
  assert.deepEqual(log, ["retain input", "hold arena"], "a waiting copy holds its inputs");

  await advance(WAIT_MS);
  await assert.rejects(handle.get(), MemoryLimitError);
  assert.deepEqual(log.slice(2).sort(), [
    "dispose output",
    "release arena",
    "release input",
    "release lists",
  ]);
});
