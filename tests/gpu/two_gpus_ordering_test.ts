import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  CudaStream,
  deviceCount,
  disposeAll,
  loadModule,
  startCopy,
} from "../../mod.ts";
import { bytesOf, hasGpu, HOLD_US, randomArray, stepKernelsPtx } from "./_helpers.ts";

// Two GPUs: work on one device ordered after work on the other, on the GPU
// (a stream may wait for an event of another device), and streams of the
// wrong device refused by name.

const twoGpus = { ignore: !hasGpu || deviceCount() < 2 };

Deno.test({
  ...twoGpus,
  name:
    "a batch copied to cuda:0, on to cuda:1 and read there by a kernel launched after it, without a CPU wait",
  async fn() {
    const module1 = await loadModule(await stepKernelsPtx(), { device: "cuda:1" });
    const copyU8 = module1.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const source = randomArray(Uint8Array, 64 * 1024 + 3, 23);
    const [destination] = await startCopy([new Uint8Array(source.length)], "cuda:1").get();
    // Warm up cuda:0→cuda:1 (peer access, the gather kernel's module).
    disposeAll(await startCopy(await startCopy([source], "cuda:0").get(), "cuda:1").get());

    // cuda:0's copy stream held back: everything below must queue without waiting.
    testAids!.delayStream(0, HOLD_US);
    const toFirst = startCopy([source], "cuda:0");
    const toSecond = startCopy(toFirst.outputs(), "cuda:1", { after: toFirst });
    const [onSecond] = toSecond.outputs();
    const work = copyU8.launch({
      grid: 64,
      block: 256,
      args: [onSecond, destination, source.length],
      after: toSecond,
    });
    const back = startCopy([destination], "cpu", { after: work });
    assert.equal(toFirst.ready(), false, "queuing the step waited for cuda:0's held copy");
    assert.equal(work.ready(), false, "the kernel on cuda:1 ran before the copy it reads");

    const [result] = await back.get();
    assert.deepEqual(bytesOf(result), bytesOf(source));
    disposeAll([await toFirst.get(), await toSecond.get(), result, destination]);
    module1.dispose();
  },
});

Deno.test({
  ...twoGpus,
  name: "a stream of the wrong device is refused by fromHandle and by a launch, naming it",
  async fn() {
    using onFirst = createStream("cuda:0");
    assert.throws(
      () => CudaStream.fromHandle(onFirst.handle, "cuda:1"),
      (error: Error) => error instanceof RangeError && /handle/.test(error.message),
    );
    const module1 = await loadModule(await stepKernelsPtx(), { device: "cuda:1" });
    const copyU8 = module1.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const [a, b] = await startCopy([new Uint8Array(16), new Uint8Array(16)], "cuda:1").get();
    assert.throws(
      () => copyU8.launch({ grid: 1, block: 32, args: [a, b, 16], stream: onFirst }),
      (error: Error) =>
        (error instanceof RangeError || error instanceof TypeError) && /stream/.test(error.message),
    );
    disposeAll([a, b]);
    module1.dispose();
  },
});
