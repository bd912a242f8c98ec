import assert from "node:assert/strict";
import { disposeAll, startCopy } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { assertRoundTrip, hasGpu, randomArray, underSanitizer } from "./_helpers.ts";

// The library used from Workers (a data loader's threads): each isolate has
// its own pools but shares the shim, the driver's contexts and the library
// streams with the others, from other OS threads.

const gpu = { ignore: !hasGpu };

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

Deno.test({
  ...gpu,
  name:
    "two Workers and the main thread copy at the same time, every byte exact; a Worker that released gives all its memory back",
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
        assert.deepEqual(reply, { rounds: 40, reservedBytes: 0 });
      }
    } finally {
      for (const worker of workers) worker.terminate();
    }
  },
});

Deno.test({
  // A terminated Worker's pools are never freed (Deno fires no unload in a
  // Worker): the leak check under compute-sanitizer would report them.
  ignore: !hasGpu || underSanitizer,
  name:
    "a Worker terminated with copies in flight leaves the process and the main thread's copies working",
  async fn() {
    const worker = startWorker();
    try {
      const started = answer(worker);
      worker.postMessage({ kind: "flood" });
      assert.equal(await started, "started");
    } finally {
      worker.terminate();
    }
    await mainRoundTrips(10, 99);
  },
});
