import assert from "node:assert/strict";
import { disposeAll, startCopy } from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { assertRoundTrip, hasGpu, underSanitizer } from "./_helpers.ts";

const gpu = { ignore: !hasGpu };
const gc = (globalThis as { gc?: () => void }).gc;

Deno.test({
  ...gpu,
  name: "a long loop of round trips does not grow: pools and process memory stay flat",
  async fn() {
    const batch = createBatchMetaData(16, 3);
    const roundTrip = async (check: boolean) => {
      const onDevice = await startCopy(batch, "cuda:0").get();
      const back = await startCopy(onDevice, "cpu").get();
      if (check) assertRoundTrip(batch, back, "cpu");
      disposeAll([onDevice, back]);
    };
    for (let i = 0; i < 200; i++) await roundTrip(false);
    gc?.();
    const device = devicePool(0).stats();
    const pinned = pinnedPool.stats();
    const rss = Deno.memoryUsage().rss;
    // Fewer under compute-sanitizer (tests/sanitize.sh), where each CUDA call is slow.
    const rounds = Number(Deno.env.get("MTC_SOAK_ROUNDS") ?? 3000);
    for (let i = 0; i < rounds; i++) await roundTrip(i % 500 === 0);
    gc?.();
    // Steady state: nothing allocated, nothing held, no growth.
    assert.equal(devicePool(0).stats().misses, device.misses);
    assert.equal(pinnedPool.stats().misses, pinned.misses);
    assert.equal(devicePool(0).stats().inUseBytes, device.inUseBytes);
    assert.equal(pinnedPool.stats().inUseBytes, pinned.inUseBytes);
    const grown = Deno.memoryUsage().rss - rss;
    // Under compute-sanitizer the tools' own shadow memory grows the process.
    if (!underSanitizer) {
      assert.ok(grown < 64 * 1024 * 1024, `RSS grew by ${(grown / 2 ** 20).toFixed(1)} MiB`);
    }
  },
});
