/**
 * The library's lifecycle hooks, installed in this one place, once per
 * isolate:
 *
 * - the idle release (`memory/idle_release.ts`): idle pooled memory goes
 *   back to CUDA after `idleReleaseMs`, and a lowered limit frees idle
 *   memory above it at once;
 * - the exit release (`transfer/exit_release.ts`): at `unload` the isolate
 *   gives back everything it holds (docs/ARCHITECTURE.md, "Memory and
 *   lifetime").
 *
 * Why from mod.ts, at import: every isolate that uses the library imports
 * the package (the main thread, each Worker, each test module of
 * `deno test`), and both hooks must be in place before its first copy
 * releases any memory or its first `setMemoryLimits`, which any export may
 * lead to. Installing waits on nothing and keeps nothing alive: the idle
 * timer is unref'd and armed only by a release, and `unload` is an event
 * listener (Deno never fires it in a Worker, whose end is the shim's
 * thread-exit handler), so a Worker that imports the package loses no
 * message (tests/worker_import_test.ts) and a process exits as before
 * (tests/gpu/exit_test.ts).
 *
 * @module
 */

import { installIdleRelease } from "./memory/idle_release.ts";
import { installExitRelease } from "./transfer/exit_release.ts";

// Installed here and nowhere else: a hook added as a side effect of
// importing some copy module (transfer/submit.ts imported exit_release.ts
// for that) is in place only where that module happens to be imported, and
// hides from a reader where the isolate's end is handled.
installIdleRelease();
installExitRelease();
