import assert from "node:assert/strict";
import { forgetPackingHistories, PackingHistory } from "../src/packing_history.ts";

const KB = 1024;
const MB = 1024 * KB;

Deno.test("a structure's walks pack up to 256 KB, or up to 4 MB after a payload of small leaves (512 bytes a leaf or less)", () => {
  const history = new PackingHistory();
  assert.equal(history.payloadLimit(), 256 * KB);
  history.notePayload(1_600_000, 100_000); // 16 bytes a leaf
  assert.equal(history.payloadLimit(), 4 * MB);
  history.notePayload(4_096_000, 1000); // 4 KB a leaf
  assert.equal(history.payloadLimit(), 256 * KB);
  // The last copy's payload counts, not the largest.
  history.notePayload(1_600_000, 100_000);
  assert.equal(history.payloadLimit(), 4 * MB);
  history.notePayload(512 * 5000, 5000); // 512 bytes a leaf
  assert.equal(history.payloadLimit(), 4 * MB);
  history.notePayload(512 * 5000 + 1, 5000); // just over 512 bytes a leaf
  assert.equal(history.payloadLimit(), 256 * KB);
});

Deno.test("the block is the last payload with a quarter to grow, at least 64 KB, within the chunk and payload limits", () => {
  const history = new PackingHistory();
  assert.equal(history.blockBytes(32 * MB), 64 * KB);
  assert.equal(history.blockBytes(16 * KB), 16 * KB);
  history.notePayload(100 * KB, 400);
  assert.equal(history.blockBytes(32 * MB), 125 * KB);
  history.notePayload(250 * KB, 400); // large leaves: the 256 KB limit
  assert.equal(history.blockBytes(32 * MB), 256 * KB);
  history.notePayload(1_600_000, 100_000);
  assert.equal(history.blockBytes(32 * MB), 2_000_000);
  assert.equal(history.blockBytes(1_700_000), 1_700_000);
});

Deno.test("a payload past the limits gets no block: the walk would only fill it and hand over, until a payload fits again", () => {
  const history = new PackingHistory();
  history.notePayload(300 * KB, 400); // 768 bytes a leaf: the 256 KB limit
  assert.equal(history.blockBytes(32 * MB), 0);
  history.notePayload(1_600_000, 100_000); // tiny leaves: under 4 MB
  assert.equal(history.blockBytes(MB), 0, "over the chunk limit");
  assert.equal(history.blockBytes(32 * MB), 2_000_000);
  history.notePayload(5 * MB, 100_000); // over 4 MB
  assert.equal(history.blockBytes(32 * MB), 0);
  history.notePayload(200 * KB, 400); // it shrank: the walk packs again
  assert.equal(history.blockBytes(32 * MB), 250 * KB);
});

Deno.test("two hand-overs in a row pause a structure's walks for 64 copies; a walk off at its first leaf does not count", () => {
  const history = new PackingHistory();
  history.handedOver(0, 0);
  history.handedOver(0, 0);
  history.handedOver(0, 0);
  assert.ok(history.blockBytes(32 * MB) > 0, "first-leaf hand-overs pause nothing");
  history.handedOver(10 * KB, 3);
  history.succeeded();
  history.handedOver(10 * KB, 3);
  assert.ok(history.blockBytes(32 * MB) > 0, "a success in between ends the run");
  history.handedOver(10 * KB, 3);
  let paused = 0;
  while (history.blockBytes(32 * MB) === 0) paused++;
  assert.equal(paused, 63);
  // A hand-over's payload is a lower bound: it raises the last payload, never lowers it.
  history.succeeded();
  history.notePayload(200 * KB, 1000);
  history.handedOver(50 * KB, 10);
  assert.equal(history.blockBytes(32 * MB), 250 * KB);
});

Deno.test("each structure has its own history: one that hands over pauses no other", () => {
  const packs = new PackingHistory();
  const handsOver = new PackingHistory();
  for (let i = 0; i < 10; i++) {
    handsOver.blockBytes(32 * MB);
    handsOver.handedOver(KB, 2);
    assert.ok(packs.blockBytes(32 * MB) > 0);
    packs.succeeded();
  }
  assert.equal(handsOver.blockBytes(32 * MB), 0);
});

Deno.test("forgetPackingHistories starts every history afresh", () => {
  const history = new PackingHistory();
  history.notePayload(1_600_000, 100_000);
  history.handedOver(KB, 2);
  history.handedOver(KB, 2);
  assert.equal(history.blockBytes(32 * MB), 0);
  forgetPackingHistories();
  assert.equal(history.payloadLimit(), 256 * KB);
  assert.equal(history.blockBytes(32 * MB), 64 * KB);
});

Deno.test("failed() counts a hand-over whatever the walk took (a mirror walk's), and walks() says whether the next walk runs", () => {
  const history = new PackingHistory();
  assert.ok(history.walks());
  history.failed();
  assert.ok(history.walks());
  history.failed();
  let paused = 0;
  while (!history.walks()) paused++;
  assert.equal(paused, 63);
  assert.equal(history.payloadLimit(), 256 * KB, "no payload noted");
});
