import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  type AsyncCopyHandle,
  createStream,
  disposeAll,
  loadModule,
  setMemoryLimits,
  startCopy,
  type Tensor,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import {
  bytesOf,
  copyThatCannotFit,
  hasGpu,
  HOLD_US,
  ptrAddress,
  randomArray,
  stepKernelsPtx,
} from "./_helpers.ts";

// Work ordered after a copy that is not queued yet (tensors of 1 MiB and
// more still staging in the background, or a copy waiting for memory):
// `launch`, `startCopy` and `dispose` with `after` return at once and are
// queued on the GPU once that copy is (nothing waits on the GPU for work not
// queued yet: that deadlocks where streams share a hardware queue), keeping
// each stream's order; `enqueueWait` on such a copy refuses, saying so.

const gpu = { ignore: !hasGpu };
const MiB = 1024 * 1024;

/** Whether `handle`'s copy was queued, as seen from now on. */
function watchQueued(handle: AsyncCopyHandle<unknown>): () => boolean {
  let queued = false;
  handle.queued().then(() => queued = true, () => queued = true);
  return () => queued;
}

Deno.test({
  ...gpu,
  name:
    "a 32 MiB pageable copy still staging: launches and the copy back ordered after it return at once; one await, bit-exact",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const bytes = 32 * MiB + 5;
    const source = randomArray(Uint8Array, bytes, 41);
    const [firstOut, secondOut] = await startCopy(
      [new Uint8Array(bytes), new Uint8Array(bytes)],
      "cuda:0",
    ).get();
    using stream = createStream("cuda:0");

    const handle = startCopy([source], "cuda:0");
    const queued = watchQueued(handle);
    const [input] = handle.outputs(); // bound at once: staged in the background
    assert.throws(
      () => handle.enqueueWait(stream),
      /Cannot make a stream wait on the GPU for a copy that is not queued yet/,
    );
    const onOwnStream = copyU8.launch({
      grid: 264,
      block: 256,
      args: [input, firstOut, bytes],
      stream,
      after: handle,
    });
    const onDefault = copyU8.launch({
      grid: 264,
      block: 256,
      args: [input, secondOut, bytes],
      after: handle,
    });
    assert.throws(() => onDefault.enqueueWait(stream), /which is not queued yet/);
    const back = startCopy([firstOut, secondOut], "cpu", { after: [onOwnStream, onDefault] });
    input.dispose({ after: onDefault });
    assert.equal(queued(), false, "all of it returned before the copy was queued");
    assert.equal(onDefault.ready(), false);
    assert.equal(back.ready(), false);

    const [first, second] = await back.get(); // the step's one await
    assert.ok(queued());
    assert.deepEqual(bytesOf(first), source);
    assert.deepEqual(bytesOf(second), source);
    await Promise.all([onOwnStream.done(), onDefault.done(), handle.get()]);
    disposeAll([first, second, firstOut, secondOut]);
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "an output of a copy still staging, disposed at once, is not reused before the staging",
  async fn() {
    const bytes = 8 * MiB;
    const staged = randomArray(Uint8Array, bytes, 51);
    const next = randomArray(Uint8Array, bytes, 52);
    // Both sizes come from the same pool class; the second copy is queued at once.
    testAids!.delayStream(0, HOLD_US);
    const handle = startCopy([staged], "cuda:0");
    const [early] = handle.outputs();
    const earlyAddress = ptrAddress(early);
    early.dispose();
    const [after] = await startCopy([next], "cuda:0", { useBackgroundThread: false }).get();
    assert.notEqual(
      ptrAddress(after),
      earlyAddress,
      "the block stays held until the staging is queued",
    );
    await handle.get();
    assert.deepEqual(bytesOf(after), next);
    after.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "a copy waiting for device memory: launches after it return at once, keep their stream's order, and run once it is queued",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const write = module.kernel("write_u32", ["ptr", "u32"]);
    const bytes = 256 * 1024 + 3;
    const source = randomArray(Uint8Array, bytes, 61);
    const [out, flag] = await startCopy([new Uint8Array(bytes), new Uint32Array(1)], "cuda:0", {
      packCpuTensors: false,
    }).get();
    using stream = createStream("cuda:0");
    const before = setMemoryLimits({});
    try {
      setMemoryLimits({ deviceBytes: devicePool(0).inUseBytes + 4 * MiB, waitMs: 10_000 });
      const held = await startCopy([new Uint8Array(4 * MiB - 64)], "cuda:0").get();
      const handle = startCopy([source], "cuda:0");
      const queued = watchQueued(handle);
      assert.throws(() => handle.outputs(), /no memory yet/);
      // On one stream: the second launch runs after the first, which waits for the copy.
      write.launch({ grid: 1, block: 1, args: [flag, 7], stream, after: handle });
      write.launch({ grid: 1, block: 1, args: [flag, 9], stream });
      const flagBack = startCopy([flag], "cpu", { after: stream });
      const synchronized = stream.synchronize();
      assert.equal(queued(), false, "all of it returned while the copy waited");
      assert.equal(flagBack.ready(), false);

      // The copy stream is held back, so the copy lands late once admitted.
      testAids!.delayStream(0, HOLD_US);
      disposeAll(held);
      await handle.queued();
      const [input] = handle.outputs();
      const read = copyU8.launch({
        grid: 64,
        block: 256,
        args: [input, out, bytes],
        after: handle,
      });
      const [[copied], [flagValue]] = await Promise.all([
        startCopy([out], "cpu", { after: read }).get(),
        flagBack.get(),
        synchronized,
      ]);
      assert.deepEqual(bytesOf(copied), source);
      assert.equal(flagValue.toTypedArray()[0], 9, "the stream kept its order");
      disposeAll([copied, flagValue, input]);
    } finally {
      setMemoryLimits(before);
    }
    disposeAll([out, flag]);
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "a copy back waiting for pinned memory: a launch ordered after it overwrites its source only once it has read it",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const scale = module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]);
    const values = randomArray(Float32Array, 16 * 1024, 71).map((v) => Number.isFinite(v) ? v : 1);
    const [x] = await startCopy([values], "cuda:0").get();
    const before = setMemoryLimits({});
    try {
      setMemoryLimits({ pinnedBytes: pinnedPool.inUseBytes + MiB, waitMs: 10_000 });
      const [onDevice] = await startCopy([new Uint8Array(MiB - 64)], "cuda:0").get();
      const [held] = await startCopy([onDevice], "cpu").get(); // the pinned room left
      onDevice.dispose();
      const handle = startCopy([x], "cpu");
      const queued = watchQueued(handle);
      // x = x * 0 + 5, on the default stream, after the copy has read x.
      const overwrite = scale.launch({
        grid: 64,
        block: 256,
        args: [x, 0, 5, values.length],
        after: handle,
      });
      assert.equal(queued(), false);
      held.dispose();
      const [copied] = await handle.get();
      assert.deepEqual(
        bytesOf(copied),
        bytesOf(values),
        "the copy read x before the launch wrote it",
      );
      await overwrite.done();
      const [back] = await startCopy([x], "cpu").get();
      assert.deepEqual([...back.toTypedArray()].slice(0, 3), [5, 5, 5]);
      disposeAll([copied, back]);
    } finally {
      setMemoryLimits(before);
    }
    x.dispose();
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "a launch after a copy that fails is never queued: it rejects with that failure and gives its holds back",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const write = module.kernel("write_u32", ["ptr", "u32"]);
    const [flag] = await startCopy([new Uint32Array(1)], "cuda:0").get();
    const inUse = devicePool(0).inUseBytes;
    const failing = copyThatCannotFit();
    const stream = createStream("cuda:0");
    const doomed = write.launch({ grid: 1, block: 1, args: [flag, 3], stream, after: failing });
    const later = write.launch({ grid: 1, block: 1, args: [flag, 4], stream });
    stream.dispose(); // destroyed once its launches are queued
    flag.dispose(); // held by both launches
    await assert.rejects(() => doomed.done(), /memory limit/);
    await assert.rejects(() => doomed.queued(), /memory limit/);
    await assert.rejects(() => failing.get(), /memory limit/);
    await later.done();
    assert.ok(devicePool(0).inUseBytes < inUse, "flag went back once neither launch held it");
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "pinned memory disposed after a stream stays held while the stream's queued work runs, when the launch not queued behind it fails",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const spin = module.kernel("spin_ns", ["u64"]);
    const write = module.kernel("write_u32", ["ptr", "u32"]);
    const [flag] = await startCopy([new Uint32Array(1)], "cuda:0").get();
    const [pinned] = await startCopy([flag], "cpu").get(); // pinned host memory
    const stream = createStream("cuda:0");
    // Queued on the stream, running for a while: it stands for the user's
    // work that still reads `pinned`.
    const running = spin.launch({ grid: 1, block: 1, args: [BigInt(HOLD_US * 1000)], stream });
    const failing = copyThatCannotFit();
    // The stream's last launch, not queued: it waits for the failing copy.
    const doomed = write.launch({ grid: 1, block: 1, args: [flag, 3], stream, after: failing });
    const held = pinnedPool.stats().inUseBytes;
    pinned.dispose({ after: stream });
    await assert.rejects(() => doomed.done(), /memory limit/);
    // The launch that never ran stood for everything on the stream: its
    // failure gave the memory back while `running` still ran.
    assert.equal(running.ready(), false, "the spin outlasts this check");
    assert.equal(pinnedPool.stats().inUseBytes, held, "still held while the stream's work runs");
    await running.done();
    stream.dispose();
    flag.dispose();
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "a launch and a copy ordered after a copy waiting for memory and a stream run once it is queued, even where the stream was disposed meanwhile",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const write = module.kernel("write_u32", ["ptr", "u32"]);
    const [flag] = await startCopy([new Uint32Array(1)], "cuda:0").get();
    const before = setMemoryLimits({});
    try {
      setMemoryLimits({ deviceBytes: devicePool(0).inUseBytes + MiB, waitMs: 10_000 });
      const [room] = await startCopy([new Uint8Array(MiB - 64)], "cuda:0").get(); // the room left
      const waiting = startCopy([new Uint8Array(MiB / 2)], "cuda:0"); // waits for `room`
      const other = createStream("cuda:0");
      const launch = write.launch({ grid: 1, block: 1, args: [flag, 7], after: [waiting, other] });
      const copy = startCopy([new Float32Array(4)], "cuda:0", { after: [waiting, other] });
      // Legal: its work is queued. The launch and copy asked for it only
      // once `waiting` was queued, and failed ("Cannot use a disposed stream").
      other.dispose();
      room.dispose();
      await launch.done();
      disposeAll([await copy.get(), await waiting.get()]);
      const [back] = await startCopy([flag], "cpu").get();
      assert.deepEqual([...back.toTypedArray()], [7]);
      disposeAll(back);
    } finally {
      setMemoryLimits(before);
    }
    flag.dispose();
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "work ordered after a copy that has failed already fails as after one that fails later: done() and get() reject, nothing throws, a copy into a result puts its values back",
  async fn() {
    // Named once it had failed, the failure was thrown by launch() and
    // startCopy() themselves; named while it was still pending, the copy
    // into a result that then failed left its values passed through written.
    const module = await loadModule(await stepKernelsPtx());
    const write = module.kernel("write_u32", ["ptr", "u32"]);
    const [flag] = await startCopy([new Uint32Array(1)], "cuda:0").get();
    const result = await startCopy({ x: new Float32Array([1, 2]), meta: "old" }, "cuda:0")
      .get() as { x: Tensor; meta: string };
    for (const when of ["already", "later"]) {
      const failing = copyThatCannotFit();
      if (when === "already") await assert.rejects(failing.get(), /memory limit/);
      const launched = write.launch({ grid: 1, block: 1, args: [flag, 3], after: failing });
      const copied = startCopy([new Float32Array(4)], "cuda:0", { after: failing });
      const into = startCopy({ x: new Float32Array([5, 6]), meta: "new" }, "cuda:0", {
        into: result,
        after: failing,
      });
      await assert.rejects(launched.done(), /memory limit/, when);
      await assert.rejects(copied.get(), /memory limit/, when);
      await assert.rejects(into.get(), /memory limit/, when);
      if (when === "later") await assert.rejects(failing.get(), /memory limit/);
      assert.equal(result.meta, "old", `${when}: the value passed through is put back`);
    }
    const [x] = await startCopy([result.x], "cpu").get();
    assert.deepEqual([...x.toTypedArray()], [1, 2]);
    disposeAll([flag, result, x]);
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "a copy into a result ordered after failed work whose staging fails too rejects get() with the staging's error, and nothing rejects unhandled",
  async fn() {
    // The ordering's rejection was left unhandled when staging threw
    // first: the process ended with an uncaught MemoryLimitError.
    const result = await startCopy({ x: new Float32Array([1, 2]), meta: "old" }, "cuda:0")
      .get() as { x: Tensor; meta: string };
    const failing = copyThatCannotFit();
    await assert.rejects(failing.get(), /memory limit/);
    pinnedPool.trim(); // the staging block must be a new allocation, which fails
    testAids!.injectFault("host-alloc", { error: 2 });
    let into;
    try {
      into = startCopy({ x: new Float32Array([5, 6]), meta: "new" }, "cuda:0", {
        into: result,
        after: failing,
      });
    } finally {
      testAids!.injectFault("off");
    }
    await assert.rejects(into.get(), {
      name: "CudaError",
      message: /^Cannot allocate \d+ bytes of pinned host memory/,
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(result.meta, "old");
    disposeAll(result);
  },
});
