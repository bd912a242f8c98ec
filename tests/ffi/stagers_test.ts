import assert from "node:assert/strict";
import { MTC_E_BAD_ARGUMENT, MTC_E_STOPPED } from "../../ffi/cuda_error.ts";
import { deviceAlloc, deviceFree } from "../../ffi/native.ts";
import { streamSynchronize } from "../../ffi/streams.ts";
import {
  stageBufferOffThread,
  stagerCreate,
  stagerDestroy,
  stagerStop,
} from "../../ffi/stagers.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { hasGpu } from "../gpu/_helpers.ts";
import { assertCudaError, NO_SUCH_DEVICE } from "./_no_device.ts";

Deno.test("a stager of no slots is refused as a bad argument, naming what was asked for", () => {
  assertCudaError(
    () => stagerCreate(0, 0, 4096),
    "allocate 0 × 4096 bytes of pinned staging memory for cuda:0",
    /^MTC_ERROR_BAD_ARGUMENT$/,
  );
});

Deno.test("a stager where CUDA cannot be used throws a CudaError naming the device", () => {
  const d = NO_SUCH_DEVICE;
  assertCudaError(
    () => stagerCreate(d, 2, 4096),
    `allocate 2 × 4096 bytes of pinned staging memory for cuda:${d}`,
  );
});

Deno.test({
  name: "a range of a JS buffer staged through fewer, smaller slots lands whole in device memory",
  ignore: !hasGpu,
  async fn() {
    const slotBytes = 4096;
    const stager = stagerCreate(0, 2, slotBytes);
    const bytes = 3 * slotBytes + 50; // more pieces than slots: the slots are reused
    const dst = deviceAlloc(0, bytes);
    try {
      const src = crypto.getRandomValues(new Uint8Array(bytes + 20));
      const status = await stageBufferOffThread({ stager, dst, src, offset: 10, bytes });
      assert.equal(status, 0);
      const back = new Uint8Array(bytes);
      testAids!.copyToBuffer({ device: 0, dst: back, src: dst });
      assert.deepEqual(back, src.subarray(10, 10 + bytes));
    } finally {
      stagerDestroy(stager);
      deviceFree(0, dst);
      streamSynchronize(0);
    }
  },
});

Deno.test({
  name:
    "a stopped stager refuses later staging with MTC_E_STOPPED, and a detached source with MTC_E_BAD_ARGUMENT",
  ignore: !hasGpu,
  async fn() {
    const dst = deviceAlloc(0, 64);
    const detaching = stagerCreate(0, 1, 4096);
    const stopped = stagerCreate(0, 1, 4096);
    try {
      const buffer = new ArrayBuffer(64);
      const src = new Uint8Array(buffer);
      buffer.transfer();
      assert.equal(
        await stageBufferOffThread({ stager: detaching, dst, src, offset: 0, bytes: 64 }),
        MTC_E_BAD_ARGUMENT,
      );
      assert.equal(stagerStop(stopped, 1000), true, "nothing runs on it");
      const fresh = new Uint8Array(64);
      assert.equal(
        await stageBufferOffThread({ stager: stopped, dst, src: fresh, offset: 0, bytes: 64 }),
        MTC_E_STOPPED,
      );
    } finally {
      stagerDestroy(detaching);
      stagerDestroy(stopped);
      deviceFree(0, dst);
      streamSynchronize(0);
    }
  },
});
