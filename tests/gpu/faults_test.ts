import assert from "node:assert/strict";
import { type FaultSite, testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  CudaError,
  deviceCount,
  disposeAll,
  releaseCachedMemory,
  startCopy,
} from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { assertRoundTrip, flatten, hasGpu, randomArray } from "./_helpers.ts";

// Every CUDA call the copy path makes can fail; each injected failure must
// reject get() (or throw) with a CudaError naming the CUDA error, leave the
// pools as they were, and leave the library working.

const OUT_OF_MEMORY = 2;
const LAUNCH_FAILED = 719;

interface Case {
  site: FaultSite;
  error: number;
  direction: "cpu→cuda:0" | "cuda:0→cpu" | "cuda:0→cuda:1";
  input: () => unknown;
  /** Holds the stream first, so that completion is waited for off-thread. */
  delayFirst?: boolean;
  /** Rearranges the input and the copy's source alike (before the copy that fails). */
  arrange?: (value: unknown) => unknown;
}

// The leaves in falling address order: copied to the CPU by the gather
// kernel (a result as it lies on the device goes by runs, without it).
const scattered = (value: unknown) => flatten(value).reverse();

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
    arrange: scattered,
  },
  {
    site: "copy",
    error: LAUNCH_FAILED,
    direction: "cuda:0→cpu",
    input: () => createBatchMetaData(16),
    arrange: scattered,
  },
  {
    // By runs: the DMA of a result as it lies on the device.
    site: "copy",
    error: LAUNCH_FAILED,
    direction: "cuda:0→cpu",
    input: () => createBatchMetaData(16),
  },
  {
    site: "event-query",
    error: LAUNCH_FAILED,
    direction: "cpu→cuda:0",
    input: () => createBatchMetaData(16),
  },
  {
    site: "event-wait",
    error: LAUNCH_FAILED,
    direction: "cpu→cuda:0",
    input: () => createBatchMetaData(16),
    delayFirst: true,
  },
  {
    site: "peer-copy",
    error: LAUNCH_FAILED,
    direction: "cuda:0→cuda:1",
    input: () => createBatchMetaData(4),
  },
];

for (const { site, error, direction, input, delayFirst, arrange } of cases) {
  Deno.test({
    ignore: !hasGpu || (direction === "cuda:0→cuda:1" && deviceCount() < 2),
    name: `a failed ${site} (CUDA error ${error}) while copying ${direction}${
      arrange ? " (scattered sources)" : ""
    } fails that copy cleanly`,
    async fn() {
      const made = input();
      const data = arrange ? arrange(made) : made;
      const fromDevice = direction.startsWith("cuda:0→");
      const onDevice = fromDevice ? await startCopy(made, "cuda:0").get() : undefined;
      const source = onDevice === undefined ? data : arrange ? arrange(onDevice) : onDevice;
      const target = direction.slice(direction.indexOf("→") + 1);
      // Allocation faults need the pools to allocate.
      if (site.endsWith("alloc")) releaseCachedMemory();
      const device = devicePool(0).stats().inUseBytes;
      const peer = target === "cuda:1" ? devicePool(1).stats().inUseBytes : 0;
      const pinned = pinnedPool.stats().inUseBytes;
      testAids!.injectFault(site, { error });
      if (delayFirst) testAids!.delayStream(0, 50_000);
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
        if (target === "cuda:1") assert.equal(devicePool(1).stats().inUseBytes, peer);
        assert.equal(pinnedPool.stats().inUseBytes, pinned);
      } finally {
        testAids!.injectFault("off");
      }
      // The next copy works and is bit-exact.
      const again = await startCopy(source, target).get();
      assertRoundTrip(data, again, target);
      disposeAll(again);
      if (onDevice !== undefined) disposeAll(onDevice);
    },
  });
}

Deno.test({
  ignore: !hasGpu,
  name:
    "dispose({ after: stream }) of pinned memory that fails to record its marker takes no hold: a plain dispose then gives the memory back",
  async fn() {
    const [onDevice] = await startCopy([new Float32Array(1024)], "cuda:0").get();
    const base = pinnedPool.stats().inUseBytes;
    const [pinned] = await startCopy([onDevice], "cpu").get();
    const stream = createStream("cuda:0");
    testAids!.injectFault("event-record", { error: 999 });
    try {
      assert.throws(() => pinned.dispose({ after: stream }), CudaError);
    } finally {
      testAids!.injectFault("off");
    }
    assert.equal(pinned.disposed, false, "the failed dispose changed nothing");
    pinned.dispose();
    assert.equal(pinnedPool.stats().inUseBytes, base, "no hold was left behind");
    stream.dispose();
    onDevice.dispose();
  },
});
