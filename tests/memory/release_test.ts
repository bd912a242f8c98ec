import assert from "node:assert/strict";
import { disposeAll, releaseCachedMemory, startCopy } from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { bytesOf, hasGpu, randomArray } from "../gpu/_helpers.ts";

const gpu = { ignore: !hasGpu };

Deno.test({
  ...gpu,
  name:
    "releaseCachedMemory() frees exactly the idle blocks and empties views of freed pinned memory",
  async fn() {
    const onDevice = await startCopy(
      [randomArray(Float32Array, 5000, 11), new Int8Array(2)],
      "cuda:0",
    )
      .get();
    const back = await startCopy(onDevice, "cpu").get();
    const view = back[0].toTypedArray();
    assert.equal(view.length, 5000);
    disposeAll([onDevice, back]);
    const idle = (stats: { reservedBytes: number; inUseBytes: number }) =>
      stats.reservedBytes - stats.inUseBytes;
    const expected = idle(devicePool(0).stats()) + idle(pinnedPool.stats());
    assert.ok(expected > 0);
    assert.equal(releaseCachedMemory(), expected);
    assert.equal(devicePool(0).stats().reservedBytes, devicePool(0).stats().inUseBytes);
    assert.equal(pinnedPool.stats().reservedBytes, pinnedPool.stats().inUseBytes);
    assert.equal(view.length, 0);
    const again = await startCopy([new Float64Array([1.5, 2.5]), new Int8Array(1)], "cuda:0").get();
    assert.deepEqual(bytesOf(again[0]), bytesOf(new Float64Array([1.5, 2.5])));
    disposeAll(again);
  },
});
