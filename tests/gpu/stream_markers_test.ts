import assert from "node:assert/strict";
import { createStream, loadModule, startCopy } from "../../mod.ts";
import { streamMarkers } from "../../src/gpu/stream_markers.ts";
import { copyThatCannotFit, hasGpu, HOLD_US, stepKernelsPtx } from "./_helpers.ts";

// What stands for a stream's work so far: a marker recorded now, which
// completes once the work queued before it has run (and not before), and
// the stream's last launch where that is not queued yet.

const gpu = { ignore: !hasGpu };

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
    const failing = copyThatCannotFit();
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
