import assert from "node:assert/strict";
import { deviceCount } from "../../mod.ts";
import {
  copyStream,
  createStream,
  defaultStream,
  defaultStreamOf,
} from "../../src/gpu/device_streams.ts";

// Where streams come from. The device checks need no GPU; the streams do.

Deno.test("createStream and defaultStream: the CPU is no stream's device, synchronously", () => {
  for (const make of [createStream, defaultStream]) {
    assert.throws(() => make("cpu"), {
      name: "TypeError",
      message: 'Invalid device "cpu": expected "cuda" or "cuda:N"',
    });
  }
});

Deno.test({
  name: "defaultStream: one object per device, the library's own (dispose() leaves it usable)",
  ignore: deviceCount() === 0,
  async fn() {
    const stream = defaultStream("cuda:0");
    assert.equal(defaultStream("cuda"), stream);
    assert.equal(defaultStreamOf(0), stream);
    stream.dispose();
    assert.equal(stream.disposed, false);
    await stream.synchronize();
    assert.match(Deno.inspect(stream), /^CudaStream\(cuda:0, default, 0x/);
  },
});

Deno.test({
  name: "copyStream: the library's copy stream is another stream than the default compute one",
  ignore: deviceCount() === 0,
  async fn() {
    const copies = copyStream(0);
    assert.equal(copyStream(0), copies);
    assert.notEqual(copies.handle, defaultStream("cuda:0").handle);
    copies.dispose();
    assert.equal(copies.disposed, false);
    await copies.synchronize();
  },
});

Deno.test({
  name: "createStream: a new stream each call, destroyed by dispose()",
  ignore: deviceCount() === 0,
  async fn() {
    const a = createStream("cuda:0");
    const b = createStream("cuda:0");
    assert.notEqual(a.handle, b.handle);
    await a.synchronize();
    a.dispose();
    b.dispose();
    assert.ok(a.disposed);
    assert.throws(() => a.handle, { message: "Cannot use a disposed stream of cuda:0" });
  },
});
