import assert from "node:assert/strict";
import { disposeAll, prefetch } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
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
