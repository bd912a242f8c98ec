/**
 * For tests/transfer/exit_release_test.ts: a process whose `unload` runs
 * the exit release, printing one line per step it sees. `Deno.args[0]`:
 * "attached" (this isolate registered with the shim, as its first pooled
 * block does), "never" (it never did), "failing" (attached; the pinned
 * pool's step throws), "twice" (attached; the release installed twice more, and an `unload`
 * dispatched by hand before the real one),
 * "gpu" (copies that leave a device tensor, a pinned tensor and an idle
 * background stager behind, none disposed; after the release it prints
 * what the process still holds, as JSON).
 * The steps are seen through the library's own hooks: a settle hook of
 * `otherWork` (what `reapFinished` calls) and the pools' `abandonAll`,
 * wrapped to print before calling the real one.
 */

import { isolateAttached, isolateId, PINNED_KIND } from "../../ffi/process_cache.ts";
import { startCopy } from "../../mod.ts";
import { otherWork } from "../../src/copies_in_flight.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { processBytes, processStagers } from "../../src/memory/process_cache.ts";
import { installExitRelease } from "../../src/transfer/exit_release.ts";

const mode = Deno.args[0];
installExitRelease();
if (mode === "twice") {
  installExitRelease();
  installExitRelease();
}
if (mode !== "never") isolateId();

otherWork.push((everyOne) => console.log(`settle copies (every one: ${everyOne})`));
const pinnedAbandon = pinnedPool.abandonAll.bind(pinnedPool);
pinnedPool.abandonAll = () => {
  console.log(`pinned pool abandons its blocks (attached: ${isolateAttached()})`);
  if (mode === "failing") throw new Error("a failed step");
  pinnedAbandon();
};
const device = devicePool(0);
const deviceAbandon = device.abandonAll.bind(device);
device.abandonAll = () => {
  console.log(`cuda:0 pool abandons its blocks (attached: ${isolateAttached()})`);
  deviceAbandon();
};
// Added after the exit release's listener, so it runs after it.
globalThis.addEventListener("unload", () => {
  console.log(`after the release (attached: ${isolateAttached()})`);
});

if (mode === "twice") {
  globalThis.dispatchEvent(new Event("unload"));
  console.log("the process ends");
}

if (mode === "gpu") {
  // 2 MiB of pageable memory: staged in the background, by a stager.
  const [large, small] = await startCopy(
    [new Float32Array(1 << 19).fill(1), new Float32Array(16).fill(2)],
    "cuda:0",
  ).get();
  const [pinned] = await startCopy([small], "cpu").get();
  const view = pinned.toTypedArray();
  console.log(`before: ${JSON.stringify(held(view))}`);
  globalThis.addEventListener("unload", () => {
    console.log(`after: ${JSON.stringify(held(view))}`);
    assertAlive(large, pinned);
  });
}

/** What the process holds, and what is left of a pinned tensor's view. */
function held(view: ArrayBufferView) {
  return {
    pinnedViewBytes: view.byteLength,
    pinnedBytes: processBytes(PINNED_KIND),
    deviceBytes: processBytes(0),
    stagerBytes: processStagers().bytes,
  };
}

// Keeps the tensors reachable until the end: none was disposed or collected.
function assertAlive(...tensors: { numel: number }[]): void {
  if (tensors.some((tensor) => tensor.numel === 0)) throw new Error("a tensor went away");
}
