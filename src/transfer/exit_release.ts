/**
 * At process exit (the `unload` event, which ends this isolate), the
 * library gives back all the memory it holds: it stops its background
 * staging, waits for the copies still in flight, then frees the
 * pools' blocks, idle or in use (tensors not yet disposed or collected:
 * the process is ending), and the background stagers. The driver would
 * reclaim all of it anyway; doing it here keeps leak checkers
 * (`compute-sanitizer --leak-check full`) quiet about memory that is not
 * leaked. Views of freed pinned memory are detached first (empty, never
 * dangling) in case a later `unload` listener still looks at a tensor.
 *
 * @module
 */

import { deviceReleaseUnused, streamSynchronize } from "../../ffi/native.ts";
import { reapFinished } from "../copy_handle.ts";
import { devicePool, devicePoolIndices } from "../memory/device_memory.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { stopAndReleaseStagers } from "../staging/background.ts";

function releaseAtExit(): void {
  // Every step on its own: a device that failed (a sticky CUDA error) must
  // not turn a clean exit into an uncaught error. Background staging stops
  // first: its calls run on other threads, into device blocks and pinned
  // slots that the steps below free (a process that exited 2–5 ms into a
  // large pageable copy crashed 4 runs in 8, SIGSEGV, before). Only this
  // isolate's stagers: `unload` ends one isolate (each test module of
  // `deno test` has its own), not necessarily the process; at process exit
  // the shim stops every other staging call before the driver's teardown.
  attempt(() => stopAndReleaseStagers(STOP_TIMEOUT_MS));
  for (const device of devicePoolIndices()) attempt(() => streamSynchronize(device));
  attempt(() => reapFinished(true));
  attempt(() => pinnedPool.releaseAll());
  for (const device of devicePoolIndices()) {
    attempt(() => devicePool(device).releaseAll());
    attempt(() => deviceReleaseUnused(device));
  }
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
