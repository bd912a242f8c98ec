/**
 * At the end of this isolate (the `unload` event: the main thread at process
 * exit, each test module of `deno test`), the library gives back all the
 * memory it holds: its pools forget every block after detaching their views
 * (empty, never dangling, in case a later `unload` listener still looks at a
 * tensor), the shim stops this isolate's background staging, waits for the
 * GPU work queued on its devices (the library's streams and the user's) and
 * takes back every block and event it held, and then
 * everything idle in the process-wide caches is freed: tensors not yet
 * disposed or collected too (the isolate is ending). The driver would
 * reclaim all of it at process exit anyway; doing it here keeps leak
 * checkers (`compute-sanitizer --leak-check full`) quiet about memory that is
 * not leaked.
 *
 * A Worker gets no `unload`; when its thread ends the shim does the same
 * without the JavaScript steps and keeps what it took back cached for the
 * other isolates (native/process_cache.c).
 *
 * @module
 */

import { isolateAttached, isolateEnd } from "../../ffi/process_cache.ts";
import { reapFinished } from "../copies_in_flight.ts";
import { devicePool, devicePoolIndices } from "../memory/device_memory.ts";
import { abandonEvents } from "../memory/event_pool.ts";
import { pinnedPool } from "../memory/pinned_memory.ts";
import { trimProcessCaches } from "../memory/process_cache.ts";

function releaseAtExit(): void {
  // Every step on its own: a device that failed (a sticky CUDA error) must
  // not turn a clean exit into an uncaught error. The shim stops this
  // isolate's background staging before it takes anything back: those calls
  // run on other threads, into device blocks and pinned slots that are freed
  // below (a process that exited 2–5 ms into a large pageable copy crashed 4
  // runs in 8, SIGSEGV, before). Only this isolate's: `unload` ends one
  // isolate (each test module of `deno test` has its own), not necessarily
  // the process; at process exit the shim stops every other staging call
  // before the driver's teardown.
  if (!isolateAttached()) return; // it never held pooled memory
  attempt(() => reapFinished(true));
  attempt(() => pinnedPool.abandonAll());
  for (const device of devicePoolIndices()) attempt(() => devicePool(device).abandonAll());
  attempt(() => abandonEvents());
  attempt(() => isolateEnd(STOP_TIMEOUT_MS));
  attempt(() => trimProcessCaches(0));
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

let installed = false;

/**
 * Adds the exit release as this isolate's `unload` listener, once (a second
 * call adds nothing). Called by src/lifecycle.ts, which every isolate that
 * uses the library imports: installing it at import of a copy module made
 * the hook depend on which module happened to be imported first.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { installExitRelease } from "./exit_release.ts";
 * installExitRelease();
 * assert.equal(installExitRelease(), undefined); // a second call adds nothing
 * ```
 */
export function installExitRelease(): void {
  if (installed) return;
  installed = true;
  globalThis.addEventListener("unload", releaseAtExit);
}
