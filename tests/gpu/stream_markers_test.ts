import assert from "node:assert/strict";
import {
  type AsyncCopyHandle,
  createStream,
  loadModule,
  setMemoryLimits,
  startCopy,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { streamMarkers } from "../../src/gpu/stream_markers.ts";
import { hasGpu, HOLD_US, stepKernelsPtx } from "./_helpers.ts";

// What stands for a stream's work so far: a marker recorded now, which
// completes once the work queued before it has run (and not before), and
// the stream's last launch where that is not queued yet.

const gpu = { ignore: !hasGpu };
const MiB = 1024 * 1024;

Deno.test({
  ...gpu,
  name:
    "streamMarkers: a marker recorded now completes once the work queued on the stream before it has run",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const spin = module.kernel("spin_ns", ["u64"]);
    using stream = createStream("cuda:0");
    const running = spin.launch({ grid: 1, block: 1, args: [BigInt(HOLD_US * 1000)], stream });
    const markers = streamMarkers(stream, "a test marker");
    assert.equal(markers.length, 1, "nothing waits to be queued on the stream");
    assert.equal(markers[0].ready(), false, "the spin still runs");
    await markers[0].done();
    assert.equal(running.ready(), true, "the marker completed after the work before it");
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name:
    "streamMarkers: with a launch not queued yet at the stream's end, the marker and that launch",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const write = module.kernel("write_u32", ["ptr", "u32"]);
    const [flag] = await startCopy([new Uint32Array(1)], "cuda:0").get();
    const inUse = devicePool(0).inUseBytes;
    const before = setMemoryLimits({});
    let failing: AsyncCopyHandle<unknown>;
    try {
      setMemoryLimits({ deviceBytes: inUse + MiB });
      failing = startCopy([new Uint8Array(2 * MiB)], "cuda:0"); // can never fit
    } finally {
      setMemoryLimits(before);
    }
    using stream = createStream("cuda:0");
    const pending = write.launch({ grid: 1, block: 1, args: [flag, 3], stream, after: failing });
    const markers = streamMarkers(stream, "a test marker");
    assert.equal(markers.length, 2);
    assert.equal(markers[1], pending);
    await markers[0].done(); // the work queued so far (none): done, whatever the launch does
    await assert.rejects(() => pending.done(), /memory limit/);
    flag.dispose();
    module.dispose();
  },
});
