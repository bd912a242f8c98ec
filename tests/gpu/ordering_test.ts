import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  CudaStream,
  defaultStream,
  deviceCount,
  disposeAll,
  hostArena,
  loadModule,
  startCopy,
  Tensor,
} from "../../mod.ts";
import { reapFinished } from "../../src/copies_in_flight.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import {
  bytesOf,
  hasGpu,
  HOLD_US,
  ptrAddress,
  randomArray,
  stepKernelsPtx,
  underSanitizer,
} from "./_helpers.ts";

// Ordering happens on the GPU, never on the CPU: with the copy stream held
// back by a slow kernel, enqueueWait and `after` return while the copy is
// still pending, and the consumer still reads the copied bytes. Disposing
// with `after` orders the memory's reuse after the consumer; a plain
// dispose does not (the race test shows the corruption it allows).

const gpu = { ignore: !hasGpu };

Deno.test({
  ...gpu,
  name: "enqueueWait and after order a consumer after a held-back copy, without a CPU wait",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const source = randomArray(Uint8Array, 96 * 1024 + 7, 11);
    const [firstOut, secondOut] = await startCopy(
      [new Uint8Array(source.length), new Uint8Array(source.length)],
      "cuda:0",
    ).get();
    using stream = createStream("cuda:0");
    // Warm up what a first use loads or allocates (the gather kernel's
    // module, pinned blocks): loading a module may wait for the device.
    const warm = copyU8.launch({ grid: 1, block: 32, args: [firstOut, secondOut, 1] });
    disposeAll(await startCopy([firstOut, secondOut], "cpu", { after: warm }).get());

    testAids!.delayStream(0, HOLD_US);
    const handle = startCopy([source], "cuda:0");
    const [input] = handle.outputs();
    handle.enqueueWait(stream);
    assert.equal(handle.ready(), false, "enqueueWait returned before the copy completed");
    const onOwnStream = copyU8.launch({
      grid: 64,
      block: 256,
      args: [input, firstOut, source.length],
      stream,
    });
    const onDefault = copyU8.launch({
      grid: 64,
      block: 256,
      args: [input, secondOut, BigInt(source.length)],
      after: handle,
    });
    const back = startCopy([firstOut, secondOut], "cpu", { after: [onOwnStream, onDefault] });
    assert.equal(handle.ready(), false, "launch and startCopy with after returned at once");
    assert.equal(onDefault.ready(), false);
    const [first, second] = await back.get();
    assert.deepEqual(bytesOf(first), source);
    assert.deepEqual(bytesOf(second), source);
    await Promise.all([onOwnStream.done(), onDefault.done(), handle.get()]);
    disposeAll([first, second, firstOut, secondOut, input]);
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "startCopy({ after: stream }) copies a result back only after the stream's work",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const scale = module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]);
    const values = Float32Array.from({ length: 1000 }, (_, i) => i);
    const [x] = await startCopy([values], "cuda:0").get();
    using stream = createStream("cuda:0");
    testAids!.delayOn(stream, HOLD_US);
    scale.launch({ grid: 4, block: 256, args: [x, 2, 1, values.length], stream });
    const back = startCopy([x], "cpu", { after: stream });
    assert.equal(back.ready(), false);
    const [result] = await back.get();
    assert.deepEqual([...result.toTypedArray()], [...values].map((v) => v * 2 + 1));
    disposeAll([x, result]);
    module.dispose();
  },
});

/**
 * A user's own FFI code reads `x` through its `ptr` on its own stream, held
 * back by a slow kernel, then disposes `x`; the next copy of the same size
 * gets the same block. Returns what the reader read.
 */
async function raceDisposeAgainstNextCopy(
  dispose: (x: Tensor, stream: CudaStream) => void,
): Promise<{ read: Uint8Array; written: Uint8Array; reused: boolean }> {
  const bytes = 200 * 1024;
  const written = randomArray(Uint8Array, bytes, 21);
  const [x, readInto] = await Promise.all([
    startCopy([written], "cuda:0").get().then(([t]) => t),
    startCopy([new Uint8Array(bytes)], "cuda:0").get().then(([t]) => t),
  ]);
  using stream = createStream("cuda:0");
  testAids!.delayOn(stream, HOLD_US);
  const xAddress = ptrAddress(x);
  testAids!.copyOn(stream, { dst: ptrAddress(readInto), src: xAddress, bytes });
  dispose(x, stream);
  const [next] = await startCopy([randomArray(Uint8Array, bytes, 22)], "cuda:0").get();
  const reused = ptrAddress(next) === xAddress;
  await stream.synchronize();
  const read = bytesOf(readInto);
  disposeAll([next, readInto]);
  return { read, written, reused };
}

Deno.test({
  ...gpu,
  name: "dispose({ after: stream }) orders reuse after the reader; a plain dispose races",
  async fn() {
    const ordered = await raceDisposeAgainstNextCopy((x, stream) => x.dispose({ after: stream }));
    assert.ok(ordered.reused, "the next copy reused the block (else the test proves nothing)");
    assert.deepEqual(
      ordered.read,
      ordered.written,
      "with after: the reader saw the tensor's bytes",
    );

    const plain = await raceDisposeAgainstNextCopy((x) => x.dispose());
    assert.ok(plain.reused);
    assert.notDeepEqual(plain.read, plain.written, "a plain dispose lets the next copy overwrite");
  },
});

Deno.test({
  ...gpu,
  name: "disposeAll({ after: work }) and a dispose during a launch defer reuse past the kernel",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const spin = module.kernel("spin_ns", ["u64"]);
    const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const bytes = 64 * 1024;
    const written = randomArray(Uint8Array, bytes, 31);
    const [x, out] = await startCopy([written, new Uint8Array(bytes)], "cuda:0", {
      packCpuTensors: false,
    }).get();
    const stream = defaultStream("cuda:0");
    spin.launch({ grid: 1, block: 1, args: [BigInt(HOLD_US * 1000)], stream });
    const work = copyU8.launch({ grid: 16, block: 256, args: [x, out, bytes], stream });
    // Launched through the library, x is held: a plain dispose is deferred.
    const xAddress = ptrAddress(x);
    x.dispose();
    const [next] = await startCopy([randomArray(Uint8Array, bytes, 32)], "cuda:0").get();
    assert.notEqual(
      ptrAddress(next),
      xAddress,
      "x's block stays held while the kernel may read it",
    );
    const [back] = await startCopy([out], "cpu", { after: work }).get();
    assert.deepEqual(bytesOf(back), written);
    disposeAll({ next, out }, { after: work });
    await work.done();
    back.dispose();
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "streams: default, created, wrapped (same device only), synchronize",
  async fn() {
    assert.equal(defaultStream("cuda"), defaultStream("cuda:0"));
    const created = createStream("cuda:0");
    const wrapped = CudaStream.fromHandle(created.handle, "cuda:0");
    assert.equal(wrapped.handle, created.handle);
    assert.equal(CudaStream.fromHandle(0n, "cuda:0").handle, 0n);
    testAids!.delayOn(wrapped, 20_000);
    await created.synchronize();
    wrapped.dispose(); // a wrapper never destroys
    await created.synchronize();
    created.dispose();
    assert.throws(() => created.handle, /disposed stream/);
    assert.throws(() => createStream("cpu"), TypeError);
    assert.throws(() => CudaStream.fromHandle(1 as never, "cuda:0"), TypeError);
    assert.throws(() => CudaStream.fromHandle(-1n, "cuda:0"), RangeError);
    if (deviceCount() > 1) {
      using other = createStream("cuda:1");
      assert.throws(() => CudaStream.fromHandle(other.handle, "cuda:0"), RangeError);
    }
  },
});

Deno.test({
  // The sanitizer's tools run kernels one at a time, whatever their streams:
  // the long kernel would end before the other stream's.
  ignore: !hasGpu || underSanitizer,
  name: "a long kernel on one stream does not keep the holds of finished work on another",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const spin = module.kernel("spin_ns", ["u64"]);
    const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    using slow = createStream("cuda:0");
    const long = spin.launch({
      grid: 1,
      block: 1,
      args: [BigInt(HOLD_US * 3 * 1000)],
      stream: slow,
    });
    const bytes = 64 * 1024;
    const [x, out] = await startCopy([new Uint8Array(bytes), new Uint8Array(bytes)], "cuda:0", {
      packCpuTensors: false,
    }).get();
    const inUse = devicePool(0).inUseBytes;
    copyU8.launch({ grid: 16, block: 256, args: [x, out, bytes] });
    x.dispose(); // deferred: the launch holds x
    assert.equal(devicePool(0).inUseBytes, inUse);
    await defaultStream("cuda:0").synchronize();
    reapFinished(); // as every startCopy and launch does
    assert.equal(long.ready(), false, "the long kernel still runs (else this proves nothing)");
    assert.ok(devicePool(0).inUseBytes < inUse, "the finished launch gave x back");
    await long.done();
    out.dispose();
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "dispose({ after: handle }) holds pinned memory until that copy settles",
  async fn() {
    const [onDevice] = await startCopy([new Uint8Array(64 * 1024)], "cuda:0").get();
    const [pinned] = await startCopy([onDevice], "cpu").get();
    assert.ok(pinned.pinned);
    testAids!.delayStream(0, HOLD_US);
    const later = startCopy([new Float32Array(16)], "cuda:0");
    const inUse = pinnedPool.inUseBytes;
    pinned.dispose({ after: later });
    assert.equal(pinnedPool.inUseBytes, inUse, "the block stays held while the copy runs");
    disposeAll(await later.get());
    assert.ok(pinnedPool.inUseBytes < inUse, "and goes back once it settled");
    onDevice.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "dispose({ after: stream }) of a tensor over a hostArena keeps the arena from reset until then",
  async fn() {
    using arena = hostArena(4096);
    const view = arena.float32(8);
    const tensor = Tensor.from(view);
    using stream = createStream("cuda:0");
    testAids!.delayOn(stream, HOLD_US);
    tensor.dispose({ after: stream });
    assert.throws(() => arena.reset(), /Cannot reset a hostArena/);
    await stream.synchronize();
    reapFinished();
    arena.reset();
  },
});

Deno.test({
  ignore: !hasGpu || deviceCount() < 2,
  name: "after: the legacy default stream of another device is waited for (handle 0 on both)",
  async fn() {
    const module = await loadModule(await stepKernelsPtx(), { device: "cuda:0" });
    const scale = module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]);
    const [x] = await startCopy([new Float32Array(4)], "cuda:0").get();
    const legacy0 = CudaStream.fromHandle(0n, "cuda:0");
    const legacy1 = CudaStream.fromHandle(0n, "cuda:1");
    testAids!.delayOn(legacy1, HOLD_US);
    const work = scale.launch({
      grid: 1,
      block: 4,
      args: [x, 1, 0, 4],
      stream: legacy0,
      after: legacy1,
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(work.ready(), false, "the launch waits for cuda:1's legacy stream");
    await work.done();
    x.dispose();
    module.dispose();
  },
});
