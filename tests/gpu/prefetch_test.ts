import assert from "node:assert/strict";
import { disposeAll, prefetch, setMemoryLimits } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { inFlight } from "../../src/copies_in_flight.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { assertRoundTrip, hasGpu } from "./_helpers.ts";

const gpu = { ignore: !hasGpu };

async function* referenceBatches(count: number) {
  for (let i = 0; i < count; i++) yield createBatchMetaData(16, i + 1);
}

Deno.test({
  ...gpu,
  name: "prefetch() to cuda:0 lands every batch bit-exactly, in order",
  async fn() {
    let step = 0;
    for await (const batch of prefetch(referenceBatches(6), "cuda:0", { depth: 3 })) {
      assertRoundTrip(createBatchMetaData(16, step + 1), batch, "cuda:0");
      disposeAll(batch);
      step++;
    }
    assert.equal(step, 6);
  },
});

Deno.test({
  ...gpu,
  name: "leaving a prefetch loop early releases the copies in flight (disposePrevious)",
  async fn() {
    const device = devicePool(0).stats().inUseBytes;
    const pinned = pinnedPool.stats().inUseBytes;
    for await (const batch of prefetch(referenceBatches(20), "cuda:0", { disposePrevious: true })) {
      assert.equal(batch.length, 16);
      if (batch[0].cams_gt.length > 0) break;
    }
    assert.equal(devicePool(0).stats().inUseBytes, device);
    assert.equal(pinnedPool.stats().inUseBytes, pinned);
  },
});

Deno.test({
  ...gpu,
  name:
    "leaving a prefetch loop does not wait for a copy that waits for memory the kept batch holds",
  async fn() {
    // The body keeps its batch past the loop (disposePrevious: false) and
    // leaves; the next copy waits for memory under the limit, and only the
    // kept batch's disposal (after the loop) frees it. The exit awaited that
    // copy: it hung until the wait timed out (60 s here), or for ever.
    const MiB = 1024 * 1024;
    const limits = setMemoryLimits({});
    const base = devicePool(0).stats().inUseBytes;
    try {
      setMemoryLimits({ deviceBytes: base + 1.5 * MiB, waitMs: 60_000 });
      const source = function* () {
        for (let i = 0; i < 4; i++) yield [new Uint8Array(MiB).fill(i)];
      };
      let kept: unknown;
      const left = (async () => {
        for await (
          const batch of prefetch(source(), "cuda:0", { depth: 1, disposePrevious: false })
        ) {
          kept = batch;
          break;
        }
        return "left";
      })();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = await Promise.race([
        left,
        new Promise((resolve) => {
          timer = setTimeout(() => resolve("still in the loop after 5 s"), 5000);
        }),
      ]);
      clearTimeout(timer);
      assert.equal(waited, "left");
      disposeAll(kept);
      // The copy that waited is admitted now, and disposed once it settles.
      const deadline = Date.now() + 5000;
      while (inFlight.size > 0 || devicePool(0).stats().inUseBytes !== base) {
        assert.ok(Date.now() < deadline, "the copy left behind settled and its memory came back");
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      setMemoryLimits(limits);
    }
  },
});
