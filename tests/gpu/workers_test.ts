import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import { disposeAll, memoryStats, releaseCachedMemory, startCopy } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { processStagers } from "../../src/memory/process_cache.ts";
import { collectUntil } from "../_helpers.ts";
import { assertRoundTrip, hasGpu, HOLD_US, randomArray } from "./_helpers.ts";

// The library used from Workers (a data loader's threads): each isolate has
// its own pools but shares the shim, its caches of idle memory, the
// driver's contexts and the library streams with the others, from other OS
// threads. Deno fires no `unload` in a Worker and a terminated one runs no
// JavaScript: what it held comes back when its thread ends.

const gpu = { ignore: !hasGpu };
const MiB = 1024 * 1024;

function startWorker(): Worker {
  return new Worker(new URL("./_copy_worker.ts", import.meta.url), { type: "module" });
}

function answer(worker: Worker): Promise<unknown> {
  return new Promise((resolve, reject) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(`worker failed: ${event.message}`));
    };
  });
}

/**
 * Waits until no other isolate holds pooled memory or a stager: everything
 * an ended Worker held is back in the process-wide caches (its thread ends
 * a little after `terminate()` returns). Fails after 20 s.
 */
async function othersHoldNothing(): Promise<void> {
  const deadline = performance.now() + 20_000;
  for (;;) {
    const stats = memoryStats();
    const pools = [stats.pinned, ...Object.values(stats.devices)];
    const stagers = processStagers();
    if (
      pools.every((pool) => pool.processBytes === pool.reservedBytes) &&
      stagers.idleBytes === stagers.bytes
    ) {
      return;
    }
    if (performance.now() > deadline) {
      throw new Error(`an ended Worker's memory did not come back: ${JSON.stringify(stats)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function mainRoundTrips(rounds: number, seed: number): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const input = {
      batch: createBatchMetaData(4, seed + round),
      ids: randomArray(Int32Array, 999, seed),
    };
    const onDevice = await startCopy(input, "cuda:0").get();
    const back = await startCopy(onDevice, "cpu").get();
    assertRoundTrip(input, back, "cpu");
    disposeAll([onDevice, back]);
  }
}

function deviceUsedBytes(): number {
  const { free, total } = testAids!.memInfo(0);
  return total - free;
}

Deno.test({
  ...gpu,
  name: "two Workers and the main thread copy at the same time, every byte exact",
  async fn() {
    const workers = [startWorker(), startWorker()];
    try {
      const answers = workers.map((worker, k) => {
        const reply = answer(worker);
        worker.postMessage({ kind: "round trips", seed: 1000 * (k + 1), rounds: 40 });
        return reply;
      });
      await mainRoundTrips(40, 7);
      for (const reply of await Promise.all(answers)) {
        assert.deepEqual(reply, { rounds: 40, inUseBytes: 0 });
      }
    } finally {
      for (const worker of workers) worker.terminate();
    }
    await othersHoldNothing();
  },
});

Deno.test({
  ...gpu,
  name:
    "Workers that each copy, dispose or drop their results, and end leave the process within one Worker's peak: later ones reuse what the first cached",
  async fn() {
    releaseCachedMemory();
    const baseline = deviceUsedBytes();
    let afterFirst = testAids!.counters();
    let firstPeak = 0;
    for (let k = 0; k < 6; k++) {
      const worker = startWorker();
      try {
        const reply = answer(worker);
        // Every other Worker drops its results: they come back when it ends.
        worker.postMessage({
          kind: "copy and end",
          bytes: 64 * MiB,
          seed: k,
          dispose: k % 2 === 0,
        });
        const result = await reply as { deviceUsedBytes?: number; error?: string };
        assert.equal(result.error, undefined);
        if (k === 0) firstPeak = result.deviceUsedBytes! - baseline;
      } finally {
        worker.terminate();
      }
      await othersHoldNothing();
      if (k === 0) afterFirst = testAids!.counters();
    }
    const counters = testAids!.counters();
    assert.equal(
      counters.deviceAllocs,
      afterFirst.deviceAllocs,
      "later Workers allocated device memory",
    );
    assert.equal(
      counters.hostAllocs,
      afterFirst.hostAllocs,
      "later Workers allocated pinned memory",
    );
    const grown = deviceUsedBytes() - baseline;
    assert.ok(
      grown <= firstPeak,
      `device memory grew by ${grown} bytes, one Worker's peak was ${firstPeak}`,
    );
    // What the Workers cached is the main thread's to free.
    const cached = memoryStats();
    assert.ok(cached.devices["cuda:0"].cachedBytes >= 64 * MiB);
    assert.ok(releaseCachedMemory() >= 128 * MiB);
    const after = memoryStats();
    assert.equal(after.devices["cuda:0"].processBytes, after.devices["cuda:0"].inUseBytes);
    assert.equal(after.pinned.processBytes, after.pinned.inUseBytes);
    assert.equal(after.outsidePools.stagers, 0);
  },
});

Deno.test({
  ...gpu,
  name:
    "a Worker terminated with copies in flight leaves the process and the main thread's copies working, and its memory comes back",
  async fn() {
    const worker = startWorker();
    try {
      const started = answer(worker);
      worker.postMessage({ kind: "flood" });
      assert.equal(await started, "started");
    } finally {
      worker.terminate();
    }
    await othersHoldNothing();
    await mainRoundTrips(10, 99);
    releaseCachedMemory();
  },
});

/**
 * The bytes of a copy back that a Worker posted with a transfer list; the
 * Worker is ended. Nothing else here keeps the buffer (its reply promise
 * does, through the Worker's handler, until that is cleared).
 */
async function postedCopyBack(bytes: number, seed: number): Promise<Uint8Array> {
  const worker = startWorker();
  try {
    const reply = answer(worker);
    worker.postMessage({ kind: "post copy back", bytes, seed });
    const { buffer, offset } = await reply as { buffer: ArrayBuffer; offset: number };
    return new Uint8Array(buffer, offset, bytes);
  } finally {
    worker.onmessage = null;
    worker.terminate();
  }
}

Deno.test({
  ...gpu,
  name:
    "pinned memory a Worker posted away (a copy back's buffer, transferred) is never reused after the Worker ends, and is freed once that buffer is gone",
  async fn() {
    // A loader Worker hands its results to the main thread and is ended.
    // The block came back to the process cache while the main thread read
    // it, and the main thread's next copy back of that size landed in it.
    releaseCachedMemory();
    const bytes = 3 * MiB; // a pinned size class of its own (4 MiB)
    let received: Uint8Array | undefined = await postedCopyBack(bytes, 41);
    await othersHoldNothing();
    for (let i = 0; i < 3; i++) {
      const onDevice = await startCopy([randomArray(Uint8Array, bytes, 50 + i)], "cuda:0").get();
      disposeAll([onDevice, await startCopy(onDevice, "cpu").get()]);
    }
    const expected = randomArray(Uint8Array, bytes, 41);
    const differs = received.findIndex((value, i) => value !== expected[i]);
    assert.equal(differs, -1, `byte ${differs} of the posted buffer was overwritten`);
    assert.deepEqual(
      [memoryStats().outsidePools.movedAway, memoryStats().outsidePools.movedAwayBytes],
      [1, 4 * MiB],
    );
    received = undefined;
    await collectUntil(() => memoryStats().outsidePools.movedAway === 0, "freeing it");
  },
});

Deno.test({
  ...gpu,
  name:
    "a Worker ended while its kernel runs on its own stream: its device memory is reused only after the kernel",
  async fn() {
    // The Worker's end waited for the library's copy streams only; the
    // kernel still wrote into a block the main thread had been given.
    releaseCachedMemory();
    const bytes = 6 * MiB; // the output's size class (8 MiB) is the Worker's alone
    const worker = startWorker();
    try {
      const launched = answer(worker);
      worker.postMessage({ kind: "kernel and end", bytes, holdNs: HOLD_US * 1000 });
      assert.equal(await launched, "launched");
    } finally {
      worker.terminate();
    }
    await othersHoldNothing();
    const written = randomArray(Uint8Array, bytes, 77);
    const [onDevice] = await startCopy([written], "cuda:0").get();
    await new Promise((resolve) => setTimeout(resolve, (2 * HOLD_US) / 1000));
    const [back] = await startCopy([onDevice], "cpu").get();
    const read = back.toTypedArray() as Uint8Array;
    const differs = read.findIndex((value, i) => value !== written[i]);
    disposeAll([onDevice, back]);
    assert.equal(differs, -1, `byte ${differs} was overwritten by the ended Worker's kernel`);
  },
});

Deno.test({
  ...gpu,
  name: "an arena a Worker leaves undisposed is freed when the Worker is ended",
  async fn() {
    // A terminated isolate runs no finalizer: the arena's FinalizationRegistry
    // never freed it, and its pinned memory stayed until the process ended.
    const rss = () => Deno.memoryUsage().rss;
    const bytes = 256 * MiB;
    const worker = startWorker();
    let filled: number;
    try {
      const made = answer(worker);
      worker.postMessage({ kind: "arena and end", bytes });
      assert.equal(await made, "made");
      filled = rss();
    } finally {
      worker.terminate();
    }
    await othersHoldNothing();
    // memoryStats() frees what is waiting to be (as the next pinned call would).
    await collectUntil(() => (memoryStats(), rss() < filled - bytes / 2), "freeing the arena");
  },
});
