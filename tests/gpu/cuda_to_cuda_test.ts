import assert from "node:assert/strict";
import { deviceCount, disposeAll, startCopy, type Tensor } from "../../mod.ts";
import { releaseIdleStagers } from "../../src/memory/stager_pool.ts";
import {
  assertRoundTrip,
  everyDtype,
  flatten,
  hasGpu,
  ptrAddress,
  randomArray,
} from "./_helpers.ts";

Deno.test({
  ignore: !hasGpu || deviceCount() < 2,
  name: "cuda:0 → cuda:1 copies are packed, bit-exact and ordered after queued work",
  async fn() {
    const input = { a: everyDtype(61), big: randomArray(Uint8Array, 5_000_000, 62) };
    const first = await startCopy(input, "cuda:0").get();
    const handle = startCopy(first, "cuda:1");
    const second = await handle.get();
    assertRoundTrip(input, second, "cuda:1");
    // The 13 small tensors travel in one gathered chunk, the large one alone.
    assert.deepEqual(handle.stats(), {
      tensors: 14,
      bytes: flatten(input).reduce((sum, leaf) => sum + leaf.byteLength, 0),
      packedTensors: 13,
      chunks: 1,
      copies: 2,
    });
    const back = await startCopy(second, "cpu").get();
    assertRoundTrip(input, back, "cpu");
    // Sources on two devices at once, to the CPU and to each device.
    const mixed = { zero: first, one: second };
    for (const device of ["cpu", "cuda:0", "cuda:1"]) {
      const handle = startCopy(mixed, device);
      const out = await handle.get();
      assertRoundTrip([input, input], [out.zero, out.one], device);
      // Leaves already on the target come back as new tensors over the same memory.
      const same = device === "cuda:0" ? [out.zero, first] : [out.one, second];
      if (device !== "cpu") {
        flatten(same[0]).forEach((leaf, i) => {
          const input = flatten(same[1])[i] as Tensor;
          assert.notEqual(leaf, input);
          assert.equal(
            (leaf as Tensor).ptr === null ? 0 : ptrAddress(leaf as Tensor),
            input.ptr === null ? 0 : ptrAddress(input),
          );
        });
      }
      disposeAll(out);
    }
    disposeAll([first, second, back]);
    releaseIdleStagers();
  },
});

Deno.test({
  ignore: !hasGpu || deviceCount() < 2,
  name:
    "a copy to cuda:1 of CPU leaves and cuda:0 leaves together is bit-exact: each direction packs its own chunk",
  async fn() {
    const onFirst = everyDtype(71);
    const first = await startCopy(onFirst, "cuda:0").get();
    // Two small CPU leaves (their chunk packed in the walk), then one
    // small and one large (no CPU chunk), beside the 13 cuda:0 tensors.
    for (
      const cpu of [
        [randomArray(Float32Array, 5, 72), randomArray(Int16Array, 3, 73)],
        [randomArray(Float32Array, 5, 74), randomArray(Uint8Array, 300_000, 75)],
      ]
    ) {
      const handle = startCopy({ cpu, first }, "cuda:1");
      const out = await handle.get();
      assertRoundTrip([cpu, onFirst], [out.cpu, out.first], "cuda:1");
      const back = await startCopy(out, "cpu").get();
      assertRoundTrip([cpu, onFirst], [back.cpu, back.first], "cpu");
      disposeAll([out, back]);
    }
    disposeAll(first);
    releaseIdleStagers();
  },
});
