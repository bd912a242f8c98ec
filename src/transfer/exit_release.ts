/**
 * At process exit, the library gives back what it caches: it waits for the
 * copies still in flight (their staging comes back when they settle), then
 * frees the pools' idle blocks and the background stagers. The driver would
 * reclaim all of it anyway; doing it here keeps leak checkers
 * (`compute-sanitizer --leak-check full`) pointed at real leaks: what stays
 * is memory of tensors that were never disposed or collected.
 *
 * @module
 */

import { streamSynchronize } from "../../ffi/native.ts";
import { reapFinished } from "../copy_handle.ts";
import { devicePoolIndices } from "../memory/device_memory.ts";
import { releaseCachedMemory } from "../memory/release.ts";
import { closeStagingWorkers } from "../staging/background.ts";

function releaseAtExit(): void {
  // Every step on its own: a device that failed (a sticky CUDA error) must
  // not turn a clean exit into an uncaught error.
  for (const device of devicePoolIndices()) attempt(() => streamSynchronize(device));
  attempt(reapFinished);
  attempt(releaseCachedMemory);
  attempt(closeStagingWorkers);
}

function attempt(step: () => unknown): void {
  try {
    step();
  } catch {
    // The process is ending; the driver reclaims what could not be freed.
  }
}

globalThis.addEventListener("unload", releaseAtExit);
