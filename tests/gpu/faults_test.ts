import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import { CudaError, disposeAll, releaseCachedMemory, startCopy } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { assertRoundTrip, hasGpu, randomArray } from "./_helpers.ts";

// Every CUDA call the copy path makes can fail; each injected failure must
// reject get() (or throw) with a CudaError naming the CUDA error, leave the
// pools as they were, and leave the library working.

const gpu = { ignore: !hasGpu }; // hasGpu includes the test aids
const OUT_OF_MEMORY = 2;
const LAUNCH_FAILED = 719;

interface Case {
  site: "host-alloc" | "device-alloc" | "copy" | "kernel" | "event-record";
  error: number;
  direction: "cpu→cuda:0" | "cuda:0→cpu";
  input: () => unknown;
}

const cases: Case[] = [
  {
    site: "device-alloc",
    error: OUT_OF_MEMORY,
    direction: "cpu→cuda:0",
    input: () => createBatchMetaData(16),
  },
  {
    site: "host-alloc",
    error: OUT_OF_MEMORY,
    direction: "cpu→cuda:0",
    input: () => createBatchMetaData(16),
  },
  {
    site: "copy",
    error: LAUNCH_FAILED,
    direction: "cpu→cuda:0",
    input: () => createBatchMetaData(16),
  },
  {
    site: "copy",
    error: LAUNCH_FAILED,
    direction: "cpu→cuda:0",
    input: () => [randomArray(Uint8Array, 20 << 20, 5)],
  },
  {
    site: "event-record",
    error: LAUNCH_FAILED,
    direction: "cpu→cuda:0",
    input: () => createBatchMetaData(16),
  },
  {
    site: "kernel",
    error: LAUNCH_FAILED,
    direction: "cuda:0→cpu",
    input: () => createBatchMetaData(16),
  },
  {
    site: "copy",
    error: LAUNCH_FAILED,
    direction: "cuda:0→cpu",
    input: () => createBatchMetaData(16),
  },
];

for (const { site, error, direction, input } of cases) {
  Deno.test({
    ...gpu,
    name:
      `a failed ${site} (CUDA error ${error}) while copying ${direction} fails that copy cleanly`,
    async fn() {
      const data = input();
      const source = direction === "cuda:0→cpu" ? await startCopy(data, "cuda:0").get() : data;
      const target = direction === "cuda:0→cpu" ? "cpu" : "cuda:0";
      // Allocation faults need the pools to allocate.
      if (site.endsWith("alloc")) releaseCachedMemory();
      const device = devicePool(0).stats().inUseBytes;
      const pinned = pinnedPool.stats().inUseBytes;
      testAids!.injectFault(site, { error });
      try {
        const outcome = await new Promise<unknown>((resolve) =>
          resolve(startCopy(source, target).get())
        ).then(
          (result) => {
            disposeAll(result);
            return undefined;
          },
          (failure: unknown) => failure,
        );
        assert.ok(outcome instanceof CudaError, `expected a CudaError, got ${outcome}`);
        assert.equal(outcome.code, error);
        assert.equal(devicePool(0).stats().inUseBytes, device);
        assert.equal(pinnedPool.stats().inUseBytes, pinned);
      } finally {
        testAids!.injectFault("off");
      }
      // The next copy works and is bit-exact.
      const again = await startCopy(source, target).get();
      assertRoundTrip(data, again, target);
      disposeAll(again);
      if (source !== data) disposeAll(source);
    },
  });
}
