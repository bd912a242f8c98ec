/**
 * A Worker for tests/gpu/workers_test.ts: uses the library from its own
 * isolate (own pools, same shim and streams as the main thread's) and
 * reports back.
 *
 * Messages: `{ kind: "round trips", seed, rounds }` copies a batch to
 * `cuda:0` and back `rounds` times, checks every byte, gives its memory
 * back and answers `{ rounds, reservedBytes }` (or `{ error }`);
 * `{ kind: "flood" }` starts 32 copies without waiting for them and
 * answers `"started"` (the test then terminates the Worker).
 */

import { disposeAll, memoryStats, releaseCachedMemory, startCopy } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { assertRoundTrip, randomArray } from "./_helpers.ts";

type Request = { kind: "round trips"; seed: number; rounds: number } | { kind: "flood" };

const worker = self as unknown as {
  onmessage: (event: MessageEvent<Request>) => void;
  postMessage(message: unknown): void;
};

worker.onmessage = async ({ data }) => {
  if (data.kind === "flood") {
    for (let i = 0; i < 32; i++) startCopy([randomArray(Uint8Array, 1 << 20, i)], "cuda:0");
    worker.postMessage("started");
    return;
  }
  try {
    for (let round = 0; round < data.rounds; round++) {
      const input = {
        batch: createBatchMetaData(4, data.seed + round),
        large: randomArray(Float32Array, 300_000, data.seed + round),
      };
      const onDevice = await startCopy(input, "cuda:0").get();
      const back = await startCopy(onDevice, "cpu").get();
      assertRoundTrip(input, back, "cpu");
      disposeAll([onDevice, back]);
    }
    releaseCachedMemory();
    const stats = memoryStats();
    const reservedBytes = stats.pinned.reservedBytes +
      Object.values(stats.devices).reduce((sum, pool) => sum + pool.reservedBytes, 0);
    worker.postMessage({ rounds: data.rounds, reservedBytes });
  } catch (error) {
    worker.postMessage({ error: String((error as Error)?.stack ?? error) });
  }
};
