import assert from "node:assert/strict";
import {
  eventCreate,
  eventRecord,
  eventRecordOn,
  eventStatus,
  eventSynchronizeOffThread,
} from "../../ffi/events.ts";
import { libraryStream, streamCreate, streamDestroy } from "../../ffi/streams.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { hasGpu } from "../gpu/_helpers.ts";
import { assertCudaError, NO_SUCH_DEVICE, UNUSABLE_DEVICE_CODES } from "./_no_device.ts";

const d = NO_SUCH_DEVICE;

Deno.test("creating or recording an event where CUDA cannot be used throws a CudaError naming the operation", () => {
  assertCudaError(() => eventCreate(d), `create a CUDA event on cuda:${d}`);
  assertCudaError(() => eventRecord(d, 1), `record a CUDA event on cuda:${d}`);
  assertCudaError(() => eventRecordOn(d, 1, 1), `record a CUDA event on a stream of cuda:${d}`);
});

Deno.test("asking about or waiting for an event never throws: a failure is its status", async () => {
  const status = eventStatus(d, 1);
  assert.ok(UNUSABLE_DEVICE_CODES.includes(status), `status ${status}`);
  const waited = await eventSynchronizeOffThread(d, 1);
  assert.ok(UNUSABLE_DEVICE_CODES.includes(waited), `status ${waited}`);
});

Deno.test({
  name:
    "an event recorded behind work still running is pending (-1), then complete (0) once waited for",
  ignore: !hasGpu,
  async fn() {
    const event = eventCreate(0);
    // The library stream stays busy for 300 ms: the event cannot complete before.
    testAids!.delayStream(0, 300_000);
    eventRecord(0, event);
    assert.equal(eventStatus(0, event), -1);
    assert.equal(await eventSynchronizeOffThread(0, event), 0);
    assert.equal(eventStatus(0, event), 0);
  },
});

Deno.test({
  name: "an event recorded on a given stream follows that stream's work, not the library stream's",
  ignore: !hasGpu,
  async fn() {
    const stream = streamCreate(0);
    const event = eventCreate(0);
    try {
      testAids!.delayOn({ device: "cuda:0", handle: BigInt(stream) }, 300_000);
      eventRecordOn(0, stream, event);
      assert.equal(eventStatus(0, event), -1);
      // The copy stream is idle: an event recorded there completes at once.
      const idle = eventCreate(0);
      assert.notEqual(libraryStream(0, "copy"), stream);
      eventRecord(0, idle);
      assert.equal(await eventSynchronizeOffThread(0, idle), 0);
      assert.equal(await eventSynchronizeOffThread(0, event), 0);
    } finally {
      streamDestroy(0, stream);
    }
  },
});
