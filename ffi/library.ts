/**
 * Loads the native shim. The only file that calls `Deno.dlopen`.
 *
 * The shim is located (see `shim_file.ts`: `MTC_SHIM_PATH`, the checkout's
 * prebuilt binary, or a verified copy in the user cache, opened from a
 * private copy of the bytes that were checked) and opened once, when this
 * module is first imported, and kept open for the life of the process
 * (never closed: pending nonblocking calls may still run in it). Importing
 * never throws and never prompts: every permission is queried before the
 * call that needs it, and a failure is kept and reported when the shim is
 * used, so code that never touches CUDA (planning, traversal, the CPU
 * target) runs without it, and `deviceCount()` can answer 0.
 *
 * @module
 */

import { locateShim, type ShimFile } from "./shim_file.ts";
import { missingFfi, missingPermissionsError } from "./shim_permissions.ts";
import { SHIM_SOURCE_HASH } from "./prebuilt.ts";
import { ABI_VERSION, symbols, testAidSymbols } from "./symbols.ts";

/** The loaded shim. */
export type ShimLibrary = Deno.DynamicLibrary<typeof symbols>;

/** The test-aid build's extra symbols, when that build is the loaded shim. */
export type TestAidLibrary = Deno.DynamicLibrary<typeof testAidSymbols>;

let library: ShimLibrary | undefined;
let file: ShimFile | undefined;
let failure: Error | undefined;
// undefined: not opened yet; null: the runtime gives no Node-API.
let hostView: HostView | null | undefined;
// The shim's absolute path (process.dlopen takes no other), fixed at load.
let hostViewPath: string | undefined;
let nodeProcess: (() => NodeProcess | undefined) | undefined;

/**
 * Makes an ArrayBuffer over pinned memory that the shim counts until V8
 * drops the memory's last buffer, wherever a transfer moved it
 * (native/host_views.c says why).
 */
export type HostView = (address: number, bytes: number) => ArrayBuffer;

/**
 * Returns the loaded shim.
 *
 * @throws {Error} why it could not be found or loaded (names the path and
 * what to do)
 */
export function getLibrary(): ShimLibrary {
  if (library) return library;
  throw failure ?? new Error("The @mtc/core native shim is not loaded");
}

/**
 * The shim's Node-API `hostView`, or `undefined` where the runtime gives no
 * Node-API (then views of pinned memory are uncounted, as Deno's own are,
 * and memory under a buffer a user moved is kept for good: `hostKeep`).
 * Opened on the first call, by the first pinned buffer: bringing in Deno's
 * Node `process` costs about 20 ms in each isolate, which a program that
 * never pins memory (no GPU) should not pay at import.
 */
export function getHostView(): HostView | undefined {
  if (hostView === undefined) {
    hostView = library && hostViewPath ? openHostView(library, hostViewPath) : null;
  }
  return hostView ?? undefined;
}

/** Where the loaded shim came from, or why none is loaded. */
export function shimInfo(): { file?: ShimFile; error?: Error } {
  return { file, error: failure };
}

/**
 * Opens the test-aid symbols of the loaded shim: present only when it is
 * the test-aid build (`MTC_SHIM_PATH=native/build/libmtc_testaid.so`, as
 * `deno task test` sets), else `undefined`.
 */
export function openTestAids(): TestAidLibrary | undefined {
  // Only a build the user named: a cached shim is opened from a private
  // copy that no longer exists, and the product has no test aids.
  if (!library || !file || file.origin !== "MTC_SHIM_PATH") return undefined;
  try {
    return Deno.dlopen(file.openPath, testAidSymbols);
  } catch {
    return undefined;
  }
}

function cString(pointer: Deno.PointerValue): string {
  return pointer === null ? "" : Deno.UnsafePointerView.getCString(pointer);
}

function open(found: ShimFile): ShimLibrary {
  const { path, origin } = found;
  // Asked first: an ungranted dlopen prompts on a terminal.
  const ffi = missingFfi(found.openPath);
  if (ffi) throw missingPermissionsError("Loading the @mtc/core native shim", [ffi]);
  let lib: ShimLibrary;
  try {
    lib = Deno.dlopen(found.openPath, symbols);
  } catch (error) {
    const fix = origin === "MTC_SHIM_PATH"
      ? "check MTC_SHIM_PATH, or unset it to use the prebuilt shim"
      : origin === "checkout"
      ? 'run "deno task build" to rebuild it'
      : "remove the file to have it fetched again, or set MTC_SHIM_PATH";
    throw new Error(
      `Cannot load the @mtc/core native shim at "${path}" (${origin}): ${
        (error as Error).message
      }; ${fix}`,
      { cause: error },
    );
  }
  const version = lib.symbols.mtc_abi_version();
  if (version !== ABI_VERSION) {
    lib.close();
    throw new Error(
      `Cannot use the @mtc/core native shim at "${path}" (${origin}): its ABI version is ${version}, this package needs ${ABI_VERSION}; ${
        origin === "MTC_SHIM_PATH"
          ? 'rebuild it with "deno task build" or unset MTC_SHIM_PATH'
          : 'rebuild it with "deno task build"'
      }`,
    );
  }
  const built = cString(lib.symbols.mtc_source_hash());
  if (origin === "checkout" && built !== SHIM_SOURCE_HASH) {
    lib.close();
    throw new Error(
      `The prebuilt @mtc/core native shim at "${path}" was built from other sources (${built}) than ffi/prebuilt.ts names (${SHIM_SOURCE_HASH}); run "deno task build"`,
    );
  }
  return lib;
}

// The same file again as a Node-API module (the loader hands back the
// library already open, so it shares the shim's state): its `hostView`
// makes the buffers that pinned memory is shown to JS through. Deno asks
// for the same --allow-ffi as `Deno.dlopen`, granted by now. A module
// whose ledger is not this library's (the file was replaced on disk since
// it was opened, and a second copy loaded) is refused: its counts would
// protect nothing.
function openHostView(lib: ShimLibrary, path: string): HostView | null {
  try {
    const process = nodeProcess?.();
    if (typeof process?.dlopen !== "function") return null;
    const module = { exports: {} as { hostView?: unknown; ledger?: unknown } };
    process.dlopen(module, path);
    const { hostView: made, ledger } = module.exports;
    if (typeof made !== "function" || ledger !== lib.symbols.mtc_host_ledger()) return null;
    return made as HostView;
  } catch {
    return null;
  }
}

interface NodeProcess {
  dlopen?(module: { exports: unknown }, path: string): void;
}

// Node's `process`, for its `dlopen`. Deno 2's global `process` is a getter
// that builds it on first use (about 20 ms), so the getter is kept now and
// called at the first pinned buffer: code that replaces globalThis.process
// later changes nothing. Where it was replaced before this import, the
// module `node:process` (built now).
async function findNodeProcess(): Promise<(() => NodeProcess | undefined) | undefined> {
  const getter = Object.getOwnPropertyDescriptor(globalThis, "process")?.get;
  if (getter) return () => getter.call(globalThis) as NodeProcess | undefined;
  try {
    const { default: process } = await import("node:process");
    return () => process as NodeProcess;
  } catch {
    return undefined;
  }
}

// MTC_SHIM_PATH may be relative, and the working directory may change
// later: resolved now (undefined where reading it is not permitted).
function absolutePath(path: string): string | undefined {
  if (path.startsWith("/")) return path;
  try {
    return `${Deno.cwd()}/${path}`;
  } catch {
    return undefined;
  }
}

// Open at import time: a library opened inside a test would be reported as
// a leak by Deno's resource sanitizer; opening is cheap (the driver is
// opened on the first CUDA call, not here).
try {
  file = await locateShim();
  library = open(file);
  hostViewPath = absolutePath(file.openPath);
  nodeProcess = await findNodeProcess();
} catch (error) {
  failure = error instanceof Error ? error : new Error(String(error));
} finally {
  // The private copy of a cached shim: mapped now, its file is not needed.
  file?.release();
}
