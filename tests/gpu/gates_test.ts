import assert from "node:assert/strict";
import { testAids } from "../../ffi/test_aids.ts";
import {
  type AsyncCopyHandle,
  createStream,
  disposeAll,
  hostArena,
  loadModule,
  setMemoryLimits,
  startCopy,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { addressOf, bytesOf, hasGpu, randomArray } from "./_helpers.ts";

// A copy that is not queued yet (tensors of 1 MiB and more staged in the
// background, or a copy waiting for memory) is still waited for on the GPU:
// `enqueueWait` and `after` return at once (a gate: the waiting stream waits
// for a word in pinned memory that the GPU writes once the copy is done),
// and work ordered after the waiting streams (`startCopy({ after })`,
// `dispose({ after })`) is queued on the copy stream only once the copy is,
// never ahead of the copy's own transfers (which would deadlock the GPU).
// While a gate is closed, the library's calls that wait for the whole
// device (freeing pinned memory, unloading a module) are held: the thread
// they would block is the one that queues the copy.

const gpu = { ignore: !hasGpu };
// The test aids' kernel module loads on first use, which waits for the
// whole device: not while a gate is closed.
if (hasGpu) testAids!.delayStream(0, 1);
const MiB = 1024 * 1024;
const HOLD_US = 300_000;
const ptx = () => Deno.readTextFile(new URL("../../examples/step_kernels.ptx", import.meta.url));

/** Whether `handle`'s copy was queued, as seen from now on. */
function watchQueued(handle: AsyncCopyHandle<unknown>): () => boolean {
  let queued = false;
  handle.queued().then(() => queued = true, () => queued = true);
  return () => queued;
}

Deno.test({
  ...gpu,
  name:
    "a 32 MiB pageable copy still staging: enqueueWait, after and the copy back return at once; one await, bit-exact",
  async fn() {
    const module = await loadModule(await ptx());
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
    handle.enqueueWait(stream);
    const onOwnStream = copyU8.launch({
      grid: 264,
      block: 256,
      args: [input, firstOut, bytes],
      stream,
    });
    const onDefault = copyU8.launch({
      grid: 264,
      block: 256,
      args: [input, secondOut, bytes],
      after: handle,
    });
    // The copy stream would deadlock waiting for these now: it is ordered once the copy is queued.
    const back = startCopy([firstOut, secondOut], "cpu", { after: [onOwnStream, onDefault] });
    input.dispose({ after: onDefault });
    assert.equal(queued(), false, "all of it returned before the copy was queued");
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
    const earlyAddress = addressOf(early);
    early.dispose();
    const [after] = await startCopy([next], "cuda:0", { useBackgroundThread: false }).get();
    assert.notEqual(
      addressOf(after),
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
    "a copy waiting for device memory: enqueueWait and after return at once; the consumer reads bit-exact",
  async fn() {
    const module = await loadModule(await ptx());
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
      handle.enqueueWait(stream);
      const flagged = write.launch({ grid: 1, block: 1, args: [flag, 7], after: handle });
      const flagBack = startCopy([flag], "cpu", { after: flagged });
      assert.equal(queued(), false, "enqueueWait and after returned while the copy waited");

      // The copy stream is held back, so the copy lands late once admitted.
      testAids!.delayStream(0, HOLD_US);
      disposeAll(held);
      await handle.queued();
      const [input] = handle.outputs();
      // Queued after the gate's wait: it reads the copy's bytes, not what was there.
      const read = copyU8.launch({ grid: 64, block: 256, args: [input, out, bytes], stream });
      const [back, [flagValue]] = await Promise.all([
        startCopy([out], "cpu", { after: read }).get(),
        flagBack.get(),
      ]);
      assert.deepEqual(bytesOf(back[0]), source);
      assert.equal(flagValue.toTypedArray()[0], 7);
      disposeAll([back, flagValue, input]);
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
    const module = await loadModule(await ptx());
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
      assert.deepEqual([...(await startCopy([x], "cpu").get())[0].toTypedArray()].slice(0, 3), [
        5,
        5,
        5,
      ]);
      copied.dispose();
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
    "while a gate is closed: pinned frees and module unloads are held, loads wait, first kernel lookups refuse; no hang",
  async fn() {
    const text = await ptx();
    const module = await loadModule(text);
    const spare = await loadModule(text);
    module.kernel("noop", []);
    const source = randomArray(Uint8Array, 32 * MiB, 81);
    using stream = createStream("cuda:0");
    const arena = hostArena(64 * 1024);
    const handle = startCopy([source], "cuda:0");
    handle.enqueueWait(stream);
    // cuMemFreeHost, module loads and unloads would wait for the gated
    // stream, which waits for staging that needs this thread; a first
    // lookup would hold the staging's transfers behind the gated stream.
    assert.throws(
      () => module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]),
      /Cannot look up kernel "scale_f32" while GPU work waits for a copy that is not queued yet/,
    );
    const noop = module.kernel("noop", []); // looked up before: no driver lookup
    const loading = loadModule(text);
    arena.dispose();
    spare.dispose();
    const [onDevice] = await handle.get();
    await stream.synchronize();
    assert.deepEqual(bytesOf(onDevice), source);
    const second = await loading;
    await noop.launch({ grid: 1, block: 1, args: [], stream }).done();
    module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]); // the gate is open now
    module.dispose();
    second.dispose();
    onDevice.dispose();
  },
});
