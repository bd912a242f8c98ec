import assert from "node:assert/strict";
import { deviceCount, disposeAll, startCopy, Tensor } from "../../../mod.ts";
import { bytesOf } from "../../gpu/_helpers.ts";

// What submit.ts decides: one DMA per storage of the result (a packed
// chunk is one), leaves packed at their places in the block; without
// pinned staging one copy per non-empty leaf. Needs CUDA (the DMAs).

const batch = (fill: number) => ({
  a: new Float32Array(4).fill(fill),
  b: new Uint8Array(3).fill(fill),
  empty: new Int32Array(0),
  t: Tensor.from(new Int16Array(6).fill(fill), [2, 3]),
});

Deno.test({
  name: "a copy into a packed result is one DMA for its chunk, the bytes at each tensor's place",
  ignore: deviceCount() === 0,
  fn: async () => {
    const result = await startCopy(batch(1), "cuda:0").get();
    const handle = startCopy(batch(7), "cuda:0", { into: result });
    assert.equal(await handle.get(), result);
    const { copies, chunks, packedTensors } = handle.stats();
    assert.deepEqual({ copies, chunks, packedTensors }, { copies: 1, chunks: 1, packedTensors: 4 });
    assert.deepEqual(bytesOf(result.a), bytesOf(new Float32Array(4).fill(7)));
    assert.deepEqual(bytesOf(result.b), bytesOf(new Uint8Array(3).fill(7)));
    assert.deepEqual(bytesOf(result.t), bytesOf(new Int16Array(6).fill(7)));
    disposeAll(result);
  },
});

Deno.test({
  name: "without pinned staging a copy into a result copies each non-empty leaf on its own",
  ignore: deviceCount() === 0,
  fn: async () => {
    const result = await startCopy(batch(1), "cuda:0").get();
    const handle = startCopy(batch(9), "cuda:0", { into: result, usePinnedStaging: false });
    await handle.get();
    assert.equal(handle.stats().copies, 3); // a, b, t; the empty leaf moves nothing
    assert.deepEqual(bytesOf(result.b), bytesOf(new Uint8Array(3).fill(9)));
    assert.deepEqual(bytesOf(result.t), bytesOf(new Int16Array(6).fill(9)));
    disposeAll(result);
  },
});
