import assert from "node:assert/strict";
import { CudaError } from "../../ffi/cuda_error.ts";
import { eventCreate, eventRecord, eventStatus } from "../../ffi/events.ts";
import { copyFromBuffer, deviceAlloc, deviceFree, hostAlloc, hostFree } from "../../ffi/native.ts";
import { streamSynchronize } from "../../ffi/streams.ts";
import { streamCreate, streamDestroy, streamWaitIdleOffThread } from "../../ffi/streams.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { hasGpu } from "../gpu/_helpers.ts";
import { assertCudaError, NO_SUCH_DEVICE } from "./_no_device.ts";

const root = new URL("../../", import.meta.url).pathname;
const testAidBuild = `${root}native/build/libmtc_testaid.so`;
const hasTestAidBuild = (() => {
  try {
    return Deno.statSync(testAidBuild).isFile;
  } catch {
    return false;
  }
})();
const noAids = testAids === undefined;
const NEEDS = " (needs the test-aid build, made with a C compiler)";

/** Whether `testAids` is defined in a fresh process whose MTC_SHIM_PATH is `shim` (unset: none). */
async function aidsWith(shim: string | undefined): Promise<boolean> {
  const url = new URL("../../ffi/test_aids.ts", import.meta.url).href;
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { testAids } from ${JSON.stringify(url)}; console.log(testAids !== undefined);`,
    ],
    env: {
      PATH: Deno.env.get("PATH") ?? "",
      HOME: Deno.env.get("HOME") ?? "/",
      ...(shim ? { MTC_SHIM_PATH: shim } : {}),
    },
    clearEnv: true,
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return new TextDecoder().decode(output.stdout).trim() === "true";
}

Deno.test({
  name: "the test aids are there only when MTC_SHIM_PATH names the test-aid build" + NEEDS,
  ignore: !hasTestAidBuild,
  async fn() {
    const product = `${root}native/prebuilt/${Deno.build.os}-${Deno.build.arch}/libmtc.so`;
    assert.equal(await aidsWith(undefined), false, "the checkout's product shim");
    assert.equal(await aidsWith(product), false, "the product shim named by MTC_SHIM_PATH");
    assert.equal(await aidsWith(testAidBuild), true, "the test-aid build");
  },
});

Deno.test({
  name: "the counters are four counts of the shim's calls" + NEEDS,
  ignore: noAids,
  fn() {
    const counters = testAids!.counters();
    assert.deepEqual(Object.keys(counters), ["hostAllocs", "deviceAllocs", "copies", "kernels"]);
    for (const value of Object.values(counters)) assert.ok(Number.isInteger(value) && value >= 0);
  },
});

Deno.test({
  name: "a failed test aid throws a CudaError naming what it was doing" + NEEDS,
  ignore: noAids,
  fn() {
    const d = NO_SUCH_DEVICE;
    const aids = testAids!;
    const stream = { device: `cuda:${d}`, handle: 1n };
    assertCudaError(() => aids.memInfo(d), `read memory info of cuda:${d}`);
    assertCudaError(() => aids.delayStream(d, 1), `delay the stream of cuda:${d}`);
    assertCudaError(() => aids.delayOn(stream, 1), `delay a stream of cuda:${d}`);
    assertCudaError(
      () => aids.copyOn(stream, { dst: 1, src: 2, bytes: 8 }),
      `copy 8 bytes on a stream of cuda:${d}`,
    );
    assertCudaError(
      () => aids.copyToBuffer({ device: d, dst: new Uint8Array(4), src: 1 }),
      `copy 4 bytes from cuda:${d} to host`,
    );
    assertCudaError(
      () => aids.sumF32({ device: d, src: 1, count: 3, dst: 2 }),
      `sum 3 floats on cuda:${d}`,
    );
    assertCudaError(
      () => aids.triggerIllegalAddress(d),
      `launch the illegal-address kernel on cuda:${d}`,
    );
    // No error code 0: arming it is refused.
    assertCudaError(
      () => aids.injectFault("copy", { error: 0 }),
      "arm a fault at copy",
      /^MTC_ERROR_BAD_ARGUMENT$/,
    );
    aids.injectFault("off");
  },
});

Deno.test({
  name:
    "an injected fault fails the named call site once, after the calls it skips, with the error asked for",
  ignore: !hasGpu,
  fn() {
    const aids = testAids!;
    try {
      aids.injectFault("device-alloc", { skip: 1, error: 2 });
      const first = deviceAlloc(0, 256);
      assert.throws(() => deviceAlloc(0, 256), (error) => {
        assert.ok(error instanceof CudaError);
        assert.equal(error.cudaName, "CUDA_ERROR_OUT_OF_MEMORY");
        return true;
      });
      deviceFree(0, deviceAlloc(0, 256));
      deviceFree(0, first);
      streamSynchronize(0);
      aids.injectFault("host-alloc", { error: 2 });
      assert.throws(() => hostAlloc(64), /pinned host memory: CUDA_ERROR_OUT_OF_MEMORY/);
      hostFree(hostAlloc(64));
      const event = eventCreate(0);
      aids.injectFault("event-record", { error: 2 });
      assert.throws(() => eventRecord(0, event), /record a CUDA event.*CUDA_ERROR_OUT_OF_MEMORY/);
      eventRecord(0, event);
      aids.injectFault("event-query", { error: 2 });
      assert.equal(eventStatus(0, event), 2);
      streamSynchronize(0);
      assert.equal(eventStatus(0, event), 0);
    } finally {
      aids.injectFault("off");
    }
  },
});

Deno.test({
  name: "the counters count the shim's allocations, and memInfo() reads the device's memory",
  ignore: !hasGpu,
  fn() {
    const aids = testAids!;
    const before = aids.counters();
    const device = deviceAlloc(0, 1024);
    const pinned = hostAlloc(1024);
    const after = aids.counters();
    assert.equal(after.deviceAllocs, before.deviceAllocs + 1);
    assert.equal(after.hostAllocs, before.hostAllocs + 1);
    deviceFree(0, device);
    streamSynchronize(0);
    hostFree(pinned);
    const { free, total } = aids.memInfo(0);
    assert.ok(free > 0 && free <= total, `${free} of ${total}`);
  },
});

Deno.test({
  name: "sumF32() adds device floats on the library stream; copyOn() copies on the stream given",
  ignore: !hasGpu,
  async fn() {
    const aids = testAids!;
    const src = deviceAlloc(0, 16);
    const dst = deviceAlloc(0, 4);
    const copy = deviceAlloc(0, 16);
    const stream = streamCreate(0);
    try {
      copyFromBuffer({ device: 0, dst: src, src: new Float32Array([1, 2, 3, 4.5]) });
      copyFromBuffer({ device: 0, dst, src: new Float32Array([0]) });
      aids.sumF32({ device: 0, src, count: 4, dst });
      const sum = new Float32Array(1);
      aids.copyToBuffer({ device: 0, dst: sum, src: dst });
      assert.equal(sum[0], 10.5);
      aids.copyOn({ device: "cuda:0", handle: BigInt(stream) }, { dst: copy, src, bytes: 16 });
      assert.equal(await streamWaitIdleOffThread(0, stream), 0);
      const copied = new Float32Array(4);
      aids.copyToBuffer({ device: 0, dst: copied, src: copy });
      assert.deepEqual([...copied], [1, 2, 3, 4.5]);
    } finally {
      streamDestroy(0, stream);
      for (const address of [src, dst, copy]) deviceFree(0, address);
      streamSynchronize(0);
    }
  },
});
