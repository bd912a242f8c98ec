import assert from "node:assert/strict";
import { deviceCount, disposeAll, startCopy } from "../../mod.ts";
import { bytesOf } from "../gpu/_helpers.ts";

// What host_to_device.ts decides: packed chunks first (one DMA each, its
// tensors counted as packed), the other leaves one by one. Needs CUDA.

const leaves = () => [new Float32Array(4).fill(2), new Uint8Array(5).fill(3), new Int32Array(0)];

Deno.test({
  name: "hostToDevice sends small leaves in one packed chunk, one DMA",
  ignore: deviceCount() === 0,
  fn: async () => {
    const handle = startCopy(leaves(), "cuda:0");
    const out = await handle.get();
    const { copies, chunks, packedTensors } = handle.stats();
    assert.deepEqual({ copies, chunks, packedTensors }, { copies: 1, chunks: 1, packedTensors: 3 });
    assert.deepEqual(bytesOf(out[1]), bytesOf(new Uint8Array(5).fill(3)));
    disposeAll(out);
  },
});

Deno.test({
  name: "hostToDevice without packing sends each leaf on its own",
  ignore: deviceCount() === 0,
  fn: async () => {
    const handle = startCopy(leaves(), "cuda:0", { packCpuTensors: false });
    const out = await handle.get();
    const { copies, chunks, packedTensors } = handle.stats();
    assert.equal(chunks, 0);
    assert.equal(packedTensors, 0);
    assert.ok(copies >= 2 && copies <= 3, `copies ${copies}`); // the empty one may be skipped
    assert.deepEqual(bytesOf(out[0]), bytesOf(new Float32Array(4).fill(2)));
    disposeAll(out);
  },
});
