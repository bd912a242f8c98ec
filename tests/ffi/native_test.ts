import assert from "node:assert/strict";
import {
  copyAsync,
  copyFromBuffer,
  copyPeer,
  deviceAlloc,
  deviceFree,
  deviceReleaseUnused,
  gather,
  hostAlloc,
  hostArrayBuffer,
  hostFree,
  pointerOf,
  pointerOfView,
  viewAddress,
} from "../../ffi/native.ts";
import { driverStatus } from "../../ffi/driver_status.ts";
import { streamSynchronize } from "../../ffi/streams.ts";
import { eventCreate, eventStatus } from "../../ffi/events.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { hasGpu } from "../gpu/_helpers.ts";
import { assertCudaError, NO_SUCH_DEVICE } from "./_no_device.ts";

// Host copies of many pieces (copyPieces): tests/ffi/copy_pieces_test.ts.

const d = NO_SUCH_DEVICE;

Deno.test("a view's address is its first byte's (its offset included), 0 for an empty or detached view", () => {
  const bytes = new Uint8Array(64);
  const base = viewAddress(bytes);
  assert.ok(base > 0);
  assert.equal(viewAddress(bytes.subarray(16)), base + 16);
  assert.equal(viewAddress(new Float64Array(bytes.buffer, 8, 2)), base + 8);
  assert.equal(viewAddress(new Uint8Array(0)), 0);
  const buffer = new ArrayBuffer(8);
  const detached = new Uint8Array(buffer);
  buffer.transfer();
  assert.equal(viewAddress(detached), 0);
});

Deno.test("an ArrayBuffer over native memory reads and writes that memory, without a copy", () => {
  const memory = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);
  const view = new Uint8Array(hostArrayBuffer(viewAddress(memory) + 2, 4));
  assert.deepEqual([...view], [3, 4, 5, 6]);
  view[0] = 42;
  assert.equal(memory[2], 42);
  assert.throws(() => hostArrayBuffer(0, 4), {
    name: "TypeError",
    message: "Cannot view a null address",
  });
});

Deno.test("pointerOf() and pointerOfView() are null for 0 and empty views, else the same address", () => {
  assert.equal(pointerOf(0), null);
  assert.equal(Deno.UnsafePointer.value(pointerOf(0x1234_5678)), 0x1234_5678n);
  const bytes = new Uint8Array(16);
  assert.equal(pointerOfView(new Uint8Array(0)), null);
  assert.equal(Deno.UnsafePointer.value(pointerOfView(bytes)), BigInt(viewAddress(bytes)));
  assert.equal(
    Deno.UnsafePointer.value(pointerOfView(bytes.subarray(4))),
    BigInt(viewAddress(bytes) + 4),
  );
});

Deno.test("every checked memory call throws a CudaError naming what it was doing and where", () => {
  assertCudaError(() => deviceAlloc(d, 4096), `allocate 4096 bytes of device memory on cuda:${d}`);
  assertCudaError(() => deviceFree(d, 1), `free device memory on cuda:${d}`);
  assertCudaError(() => deviceReleaseUnused(d), `give unused device memory of cuda:${d} back`);
  assertCudaError(
    () => copyAsync({ device: d, dst: 1, src: 2, bytes: 8 }),
    `copy 8 bytes on cuda:${d}`,
  );
  assertCudaError(
    () => copyFromBuffer({ device: d, dst: 1, src: new Uint8Array(12) }),
    `copy 12 bytes from host to cuda:${d}`,
  );
  assertCudaError(
    () =>
      copyPeer({
        dstDevice: d,
        dst: 1,
        srcDevice: d + 1,
        src: 2,
        bytes: 16,
        fences: { beforeCopy: 3, afterCopy: 4 },
      }),
    `copy 16 bytes from cuda:${d + 1} to cuda:${d}`,
  );
  assertCudaError(
    () => gather({ device: d, table: 1, count: 3, dst: 2 }),
    `gather 3 tensors on cuda:${d}`,
  );
});

Deno.test({
  name:
    "pinned host memory cannot be allocated without a driver: a CudaError naming the size (needs a machine without libcuda.so.1)",
  ignore: driverStatus().name !== "MTC_ERROR_NO_DRIVER",
  fn() {
    assertCudaError(
      () => hostAlloc(4096),
      "allocate 4096 bytes of pinned host memory",
      /^MTC_ERROR_NO_DRIVER$/,
    );
  },
});

Deno.test({
  name:
    "bytes go host → device → pinned host through the library stream, and the copy's event completes",
  ignore: !hasGpu,
  fn() {
    const bytes = 1 << 16;
    const pinned = hostAlloc(bytes);
    const device = deviceAlloc(0, bytes);
    const event = eventCreate(0);
    try {
      const src = crypto.getRandomValues(new Uint8Array(bytes));
      copyFromBuffer({ device: 0, dst: device, src });
      copyAsync({ device: 0, dst: pinned, src: device, bytes, event });
      streamSynchronize(0);
      assert.equal(eventStatus(0, event), 0);
      const view = hostArrayBuffer(pinned, bytes);
      assert.deepEqual(new Uint8Array(view), src);
      view.transfer(0); // no view may outlive the memory
      const back = new Uint8Array(bytes);
      testAids!.copyToBuffer({ device: 0, dst: back, src: device });
      assert.deepEqual(back, src);
    } finally {
      deviceFree(0, device);
      streamSynchronize(0);
      hostFree(pinned);
    }
  },
});

Deno.test({
  name:
    "a gather packs the listed pieces of device memory into one buffer and copies it to the host",
  ignore: !hasGpu,
  fn() {
    const src = deviceAlloc(0, 256);
    const dst = deviceAlloc(0, 64);
    const table = hostAlloc(3 * 8 * 2);
    const host = hostAlloc(64);
    try {
      const input = Uint8Array.from({ length: 256 }, (_, i) => i);
      copyFromBuffer({ device: 0, dst: src, src: input });
      // Two pieces, in reverse order: bytes 100..119 to offset 0, 10..29 to 20.
      const entries = new Float64Array(hostArrayBuffer(table, 48));
      entries.set([src + 100, 0, 20, src + 10, 20, 20]);
      gather({ device: 0, table, count: 2, dst, hostDst: host, bytes: 40 });
      streamSynchronize(0);
      const out = new Uint8Array(hostArrayBuffer(host, 40));
      assert.deepEqual([...out], [...input.subarray(100, 120), ...input.subarray(10, 30)]);
      out.buffer.transfer(0);
      entries.buffer.transfer(0);
    } finally {
      deviceFree(0, src);
      deviceFree(0, dst);
      streamSynchronize(0);
      hostFree(table);
      hostFree(host);
    }
  },
});
