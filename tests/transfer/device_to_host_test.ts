import assert from "node:assert/strict";
import { deviceCount, disposeAll, startCopy } from "../../mod.ts";

// What device_to_host.ts decides: packed leaves gathered on the device into
// one chunk (one gather and DMA), the others one DMA each, an empty tensor
// none; the outputs are pinned. Needs CUDA.

Deno.test({
  name: "deviceToHost gathers packed leaves in one transfer, else one per non-empty tensor",
  ignore: deviceCount() === 0,
  fn: async () => {
    const data = [new Float32Array(4).fill(5), new Uint8Array(3).fill(6), new Int32Array(0)];
    const onDevice = await startCopy(data, "cuda:0").get();
    for (const packCpuTensors of [true, false]) {
      const handle = startCopy(onDevice, "cpu", { packCpuTensors });
      const back = await handle.get();
      assert.equal(
        handle.stats().copies,
        packCpuTensors ? 1 : 2,
        `packCpuTensors ${packCpuTensors}`,
      );
      assert.deepEqual(back[0].toTypedArray(), data[0]);
      assert.deepEqual(back[1].toTypedArray(), data[1]);
      assert.equal(back[2].byteLength, 0);
      assert.ok(back[0].pinned);
      disposeAll(back);
    }
    disposeAll(onDevice);
  },
});
