import assert from "node:assert/strict";
import { clearStreamTail, setStreamTail, streamTail } from "../../src/gpu/stream_tail.ts";

// The registry of stream tails, by identity (the works are plain objects
// here: it never looks inside them).

Deno.test("streamTail: none until set, per device and stream address", () => {
  const tail = { work: {}, queued: Promise.resolve() };
  assert.equal(streamTail(0, 0x6001), undefined);
  setStreamTail(0, 0x6001, tail);
  try {
    assert.equal(streamTail(0, 0x6001), tail);
    assert.equal(streamTail(0, 0x6002), undefined);
    assert.equal(streamTail(1, 0x6001), undefined);
  } finally {
    clearStreamTail(0, 0x6001, tail.work);
  }
  assert.equal(streamTail(0, 0x6001), undefined);
});

Deno.test("setStreamTail: a later launch replaces the tail; clearing the earlier one then changes nothing", () => {
  const earlier = { work: {}, queued: Promise.resolve() };
  const later = { work: {}, queued: Promise.resolve() };
  setStreamTail(2, 0x6003, earlier);
  setStreamTail(2, 0x6003, later);
  clearStreamTail(2, 0x6003, earlier.work);
  assert.equal(streamTail(2, 0x6003), later);
  clearStreamTail(2, 0x6003, later.work);
  assert.equal(streamTail(2, 0x6003), undefined);
});

Deno.test("clearStreamTail: on a stream or device with no tail it does nothing", () => {
  clearStreamTail(5, 0x6004, {});
  assert.equal(streamTail(5, 0x6004), undefined);
});
