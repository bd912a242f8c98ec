/**
 * Finds and loads the native shim. The only file that calls `Deno.dlopen`.
 *
 * Lookup order: `MTC_SHIM_PATH`, then `native/build/libmtc.so` beside this
 * package (resolved from `import.meta.url`, never from the working directory).
 * The library is opened once, when this module is first imported, and kept
 * open for the life of the process (never `dlclose`d: pending nonblocking
 * calls may still run in it). Failing to open it is not an error until the
 * shim is used, so code that never touches CUDA (planning, traversal, the
 * CPU target) runs without it.
 *
 * @module
 */

import { ABI_VERSION, symbols } from "./symbols.ts";

/** The loaded shim. */
export type ShimLibrary = Deno.DynamicLibrary<typeof symbols>;

const BUILD_COMMAND = "deno task build";
let cached: ShimLibrary | undefined;
let failure: unknown;

function tryGetEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch (error) {
    // Without --allow-env the override is simply not consulted.
    if (error instanceof Deno.errors.NotCapable) return undefined;
    throw error;
  }
}

function candidatePath(): string {
  const override = tryGetEnv("MTC_SHIM_PATH");
  if (override) return override;
  const url = new URL("../native/build/libmtc.so", import.meta.url);
  if (url.protocol !== "file:") {
    throw new Error(
      `Cannot load the @mtc/core native shim from ${url.href}: it must be a local file; build it with "${BUILD_COMMAND}" in a local checkout and set MTC_SHIM_PATH to its path`,
    );
  }
  return decodeURIComponent(url.pathname);
}

/**
 * Returns the loaded shim, loading it on first use.
 *
 * @throws {Error} when the library is missing or of another ABI version; the
 * message names the path tried and the command that builds it.
 */
export function getLibrary(): ShimLibrary {
  if (cached) return cached;
  if (failure) throw failure;
  try {
    cached = open();
  } catch (error) {
    failure = error;
    throw error;
  }
  return cached;
}

function open(): ShimLibrary {
  const path = candidatePath();
  let lib: ShimLibrary;
  try {
    lib = Deno.dlopen(path, symbols);
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    throw new Error(
      `Cannot load the @mtc/core native shim at "${path}": run "${BUILD_COMMAND}" to build it (needs the CUDA toolkit), or set MTC_SHIM_PATH to a built libmtc.so`,
      { cause: error },
    );
  }
  const version = lib.symbols.mtc_abi_version();
  if (version !== ABI_VERSION) {
    lib.close();
    throw new Error(
      `Cannot use the @mtc/core native shim at "${path}": its ABI version is ${version}, expected ${ABI_VERSION}; rebuild it with "${BUILD_COMMAND}"`,
    );
  }
  return lib;
}

// Open at import time: a library opened inside a test would be reported as
// a leak by Deno's resource sanitizer, and opening is cheap (cudart touches
// the driver only on the first CUDA call).
try {
  getLibrary();
} catch {
  // Reported on first use instead.
}
