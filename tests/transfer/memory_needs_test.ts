/**
 * What a copy needs of the pools before it may start
 * (src/transfer/memory_needs.ts): the admission queue compares these to
 * the limits.
 */
import assert from "node:assert/strict";
import { CPU } from "../../src/device.ts";
import { BlockPool } from "../../src/memory/block_pool.ts";
import { IndexList } from "../../src/number_list.ts";
import { BACKGROUND_MIN_BYTES } from "../../src/staging/background.ts";
import { type AdmittedRoute, needsOf } from "../../src/transfer/memory_needs.ts";

const pinned = new BlockPool({ alloc: () => 4096, free: () => {} });
const device = new BlockPool({ alloc: () => 4096, free: () => {} });

/** A CPU→CUDA copy of pageable `leaves` (all of them CPU→CUDA). */
function toDevice(leaves: Uint8Array[], options: AdmittedRoute["options"]): AdmittedRoute {
  const h2d = new IndexList();
  leaves.forEach((_, k) => h2d.push(k));
  const movedBytes = leaves.reduce((sum, leaf) => sum + leaf.byteLength, 0);
  return { target: 0, movedBytes, options, h2d, leaves };
}

Deno.test("a CUDA→CPU copy needs pinned memory for every byte it moves", () => {
  const route: AdmittedRoute = {
    target: CPU,
    movedBytes: 4096,
    options: { usePinnedStaging: true, useBackgroundThread: true },
    h2d: new IndexList(),
    leaves: [],
  };
  const needs = needsOf(route, pinned, () => device);
  assert.deepEqual(needs.map(({ pool, bytes, memory }) => ({ pool, bytes, memory })), [
    { pool: pinned, bytes: 4096, memory: "pinned" },
  ]);
});

Deno.test("a CPU→CUDA copy needs its bytes on the device, and pinned staging only for small pageable leaves", () => {
  const small = new Uint8Array(100);
  const large = new Uint8Array(BACKGROUND_MIN_BYTES);
  const staged = toDevice([small, large], { usePinnedStaging: true, useBackgroundThread: true });
  const [onDevice, staging] = needsOf(staged, pinned, () => device);
  assert.equal(onDevice.pool, device);
  assert.equal(onDevice.bytes, 100 + BACKGROUND_MIN_BYTES);
  assert.equal(onDevice.memory, "cuda:0");
  assert.equal(
    staging.bytes,
    100,
    "the large leaf is staged in the background, in slots of its own",
  );

  const noThread = toDevice([small, large], { usePinnedStaging: true, useBackgroundThread: false });
  assert.equal(needsOf(noThread, pinned, () => device)[1].bytes, 100 + BACKGROUND_MIN_BYTES);
  const noStaging = toDevice([small, large], {
    usePinnedStaging: false,
    useBackgroundThread: true,
  });
  assert.equal(needsOf(noStaging, pinned, () => device)[1].bytes, 0);
});
