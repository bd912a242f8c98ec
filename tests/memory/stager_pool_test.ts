import assert from "node:assert/strict";
import { deviceCount } from "../../mod.ts";
import {
  giveStager,
  releaseIdleStagers,
  SLOT_BYTES,
  SLOTS,
  stagerMemory,
  takeStager,
} from "../../src/memory/stager_pool.ts";

Deno.test({
  name: "a stager taken and given back is counted with its slots until the idle ones are released",
  ignore: deviceCount() === 0,
  fn() {
    releaseIdleStagers();
    const before = stagerMemory();
    const stager = takeStager(0);
    assert.deepEqual(stagerMemory(), {
      stagers: before.stagers + 1,
      bytes: before.bytes + SLOTS * SLOT_BYTES,
    });
    giveStager(stager);
    assert.equal(stagerMemory().stagers, before.stagers + 1); // idle, kept for reuse
    assert.equal(releaseIdleStagers(), SLOTS * SLOT_BYTES);
    assert.deepEqual(stagerMemory(), before);
  },
});

Deno.test("without a usable device there is no stager and nothing to release", {
  ignore: deviceCount() > 0,
}, () => {
  assert.deepEqual(stagerMemory(), { stagers: 0, bytes: 0 });
  assert.equal(releaseIdleStagers(), 0);
});
