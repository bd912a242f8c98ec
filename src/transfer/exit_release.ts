/**
 * At process exit (the `unload` event), the library gives back all the
 * memory it holds: it stops background staging, waits for the copies
 * still in flight, then frees the
 * pools' blocks, idle or in use (tensors not yet disposed or collected:
 * the process is ending), and the background stagers. The driver would
 * reclaim all of it anyway; doing it here keeps leak checkers
 * (`compute-sanitizer --leak-check full`) quiet about memory that is not
 * leaked. Views of freed pinned memory are detached first (empty, never
 * dangling) in case a later `unload` listener still looks at a tensor.
 *
 * @module
 */

import { deviceReleaseUnused, stopStaging, streamSynchronize } from "../../ffi/native.ts";
import { reapFinished } from "../copy_handle.ts";
import { devicePool, devicePoolIndices } from "../memory/device_memory.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { closeStagingWorkers, releaseAllStagersAfterStop } from "../staging/background.ts";

function releaseAtExit(): void {
  // Every step on its own: a device that failed (a sticky CUDA error) must
  // not turn a clean exit into an uncaught error. Background staging stops
  // first, since its calls (on other threads) write into device blocks and
  // pinned slots that the steps below free, and the driver's own teardown
  // must not run under them either: a process that exited 2–5 ms into a
  // large pageable copy crashed 4 runs in 8 (SIGSEGV) before.
  let stopped = false;
  attempt(() => stopped = stopStaging(STOP_TIMEOUT_MS) === 0);
  for (const device of devicePoolIndices()) attempt(() => streamSynchronize(device));
  attempt(() => reapFinished(true));
  attempt(() => pinnedPool.releaseAll());
  for (const device of devicePoolIndices()) {
    attempt(() => devicePool(device).releaseAll());
    attempt(() => deviceReleaseUnused(device));
  }
  // Busy stagers too once staging stopped (their calls never return to JS).
  attempt(stopped ? releaseAllStagersAfterStop : closeStagingWorkers);
}

// A staging call stops within one slot (2 MiB: about a millisecond).
const STOP_TIMEOUT_MS = 5000;

function attempt(step: () => unknown): void {
  try {
    step();
  } catch {
    // The process is ending; the driver reclaims what could not be freed.
  }
}

globalThis.addEventListener("unload", releaseAtExit);
