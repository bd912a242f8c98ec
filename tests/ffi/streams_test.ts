import assert from "node:assert/strict";
import { eventCreate, eventRecordOn } from "../../ffi/events.ts";
import {
  libraryStream,
  streamCheck,
  streamCreate,
  streamDestroy,
  streamFence,
  streamStatus,
  streamSynchronize,
  streamWaitEvent,
  streamWaitIdleOffThread,
} from "../../ffi/streams.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { hasGpu } from "../gpu/_helpers.ts";
import { assertCudaError, NO_SUCH_DEVICE, UNUSABLE_DEVICE_CODES } from "./_no_device.ts";

const d = NO_SUCH_DEVICE;

Deno.test("the checked stream calls throw a CudaError naming the operation where CUDA cannot be used", () => {
  assertCudaError(() => streamSynchronize(d), `synchronize the stream of cuda:${d}`);
  assertCudaError(() => libraryStream(d, "copy"), `create the copy stream of cuda:${d}`);
  assertCudaError(() => libraryStream(d, "compute"), `create the compute stream of cuda:${d}`);
  assertCudaError(() => streamCreate(d), `create a CUDA stream on cuda:${d}`);
  assertCudaError(() => streamDestroy(d, 1), `destroy a CUDA stream of cuda:${d}`);
  assertCudaError(
    () => streamFence({ waiterDevice: d, waiter: 1, signalDevice: d, signaler: 2, event: 3 }),
    `order a stream of cuda:${d} after a stream of cuda:${d}`,
  );
  assertCudaError(() => streamWaitEvent(d, 1, 2), `make a stream of cuda:${d} wait for an event`);
});

Deno.test("asking about or waiting for a stream never throws: a failure is its status", async () => {
  for (
    const status of [streamCheck(d, 1), streamStatus(d, 1), await streamWaitIdleOffThread(d, 1)]
  ) {
    assert.ok(UNUSABLE_DEVICE_CODES.includes(status), `status ${status}`);
  }
});

Deno.test({
  name: "a device's copy and compute streams are two streams, the same ones on every call",
  ignore: !hasGpu,
  fn() {
    const copy = libraryStream(0, "copy");
    const compute = libraryStream(0, "compute");
    assert.notEqual(copy, compute);
    assert.equal(libraryStream(0, "copy"), copy);
    assert.equal(libraryStream(0, "compute"), compute);
    assert.equal(streamCheck(0, copy), 0);
    assert.equal(streamCheck(0, compute), 0);
  },
});

Deno.test({
  name: "a busy stream is pending (-1) until its work is done, then idle (0)",
  ignore: !hasGpu,
  async fn() {
    const stream = streamCreate(0);
    try {
      assert.equal(streamCheck(0, stream), 0);
      testAids!.delayOn({ device: "cuda:0", handle: BigInt(stream) }, 300_000);
      assert.equal(streamStatus(0, stream), -1);
      assert.equal(await streamWaitIdleOffThread(0, stream), 0);
      assert.equal(streamStatus(0, stream), 0);
    } finally {
      streamDestroy(0, stream);
    }
  },
});

Deno.test({
  name:
    "a fenced stream waits on the GPU for the signaler's work so far, and so does one waiting for an event",
  ignore: !hasGpu,
  async fn() {
    const signaler = streamCreate(0);
    const waiter = streamCreate(0);
    const other = streamCreate(0);
    try {
      testAids!.delayOn({ device: "cuda:0", handle: BigInt(signaler) }, 300_000);
      streamFence({ waiterDevice: 0, waiter, signalDevice: 0, signaler, event: eventCreate(0) });
      assert.equal(streamStatus(0, waiter), -1, "the waiter has the wait queued");
      const event = eventCreate(0);
      eventRecordOn(0, signaler, event);
      streamWaitEvent(0, other, event);
      assert.equal(streamStatus(0, other), -1);
      assert.equal(await streamWaitIdleOffThread(0, waiter), 0);
      assert.equal(await streamWaitIdleOffThread(0, other), 0);
      assert.equal(streamStatus(0, signaler), 0, "the signaler finished before its waiters");
    } finally {
      for (const stream of [signaler, waiter, other]) streamDestroy(0, stream);
    }
  },
});
