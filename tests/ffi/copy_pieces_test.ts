import assert from "node:assert/strict";
import { addressOf, copyPieces } from "../../ffi/native.ts";

/** `count` random pieces of 1 to `maxBytes` bytes, and a table that copies them back to back into `dst`. */
function piecesInto(dst: Uint8Array, count: number, maxBytes: number) {
  const sources: Uint8Array[] = [];
  const table = new Float64Array(3 * count);
  let offset = 0;
  for (let i = 0; i < count; i++) {
    const bytes = 1 + Math.floor(Math.random() * maxBytes);
    const src = crypto.getRandomValues(new Uint8Array(bytes));
    sources.push(src);
    table.set([addressOf(src), addressOf(dst) + offset, bytes], 3 * i);
    offset += bytes;
  }
  return { sources, table, bytes: offset };
}

function assertPiecesLanded(dst: Uint8Array, sources: Uint8Array[]): void {
  let offset = 0;
  for (const [i, src] of sources.entries()) {
    assert.deepEqual(dst.subarray(offset, offset + src.length), src, `piece ${i}`);
    offset += src.length;
  }
}

Deno.test("copyPieces copies every piece byte for byte with several threads", () => {
  const dst = new Uint8Array(4 << 20);
  const { sources, table } = piecesInto(dst, 1000, 4096);
  copyPieces(table, sources.length, 8);
  assertPiecesLanded(dst, sources);
});

Deno.test("copyPieces copies on the calling thread alone when asked for one thread", () => {
  const dst = new Uint8Array(1 << 20);
  const { sources, table } = piecesInto(dst, 100, 1000);
  copyPieces(table, sources.length, 1);
  assertPiecesLanded(dst, sources);
});

Deno.test("copyPieces does the next job right after the last (helpers from earlier jobs are reused)", () => {
  for (let round = 0; round < 50; round++) {
    const dst = new Uint8Array(256 << 10);
    const { sources, table } = piecesInto(dst, 1 + round * 7, 512);
    copyPieces(table, sources.length, 1 + (round % 16));
    assertPiecesLanded(dst, sources);
  }
});

Deno.test("copyPieces of no pieces does nothing", () => {
  copyPieces(new Float64Array(0), 0, 4);
});

Deno.test("addressOf gives a view's first byte, and 0 for a detached or empty view", () => {
  const buffer = new ArrayBuffer(64);
  const whole = new Uint8Array(buffer);
  assert.equal(addressOf(new Uint8Array(buffer, 16, 8)), addressOf(whole) + 16);
  assert.equal(addressOf(new Uint8Array(0)), 0);
  buffer.transfer();
  assert.equal(addressOf(whole), 0);
});
