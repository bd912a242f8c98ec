import assert from "node:assert/strict";
import { deviceCount, disposeAll, startCopy } from "../../mod.ts";

// What device_to_host.ts decides: packed leaves go in one transfer (a run
// where they lie in order on the device, else gathered into one chunk), the
// others one DMA each, an empty tensor none; the outputs are pinned. Needs
// CUDA. (Runs against gathers: tests/gpu/cuda_to_cpu_test.ts.)

Deno.test({
  name: "deviceToHost sends packed leaves in one transfer, else one per non-empty tensor",
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
