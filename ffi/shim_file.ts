/**
 * Finds the native shim's file for every kind of import, without a toolkit.
 *
 * In this order:
 * 1. `MTC_SHIM_PATH`, when set (and `--allow-env` lets it be read);
 * 2. for a `file:` module (a checkout), the committed binary
 *    `native/prebuilt/<os>-<arch>/libmtc.so` beside this package;
 * 3. for a remote module (`jsr:`, `https:`, `http:`), a copy in the per-user
 *    cache (`$XDG_CACHE_HOME`, else `$HOME/.cache`, under
 *    `mtc-core/<version>/abi<N>/<os>-<arch>/`), filled on first use (or by
 *    `install.ts`) by fetching the same committed binary from beside the
 *    module, checked against the SHA-256 in `prebuilt.ts`, written under a
 *    temporary name and renamed, so that two processes starting at once
 *    cannot leave a torn file. After that it works offline.
 *
 * The cache and why it is trusted: `shim_cache.ts`; the bounded, checked
 * download: `shim_download.ts`. Every permission is asked with `querySync`
 * before the call that needs it (see `shim_permissions.ts`), so that nothing
 * prompts, and what is missing is reported at once. Every failure is an
 * `Error` that names the path or URL and what to do.
 *
 * Only the first download waits on I/O: every other case is synchronous
 * (`statSync`, `readFileSync`, a synchronous hash), so that importing the
 * package never lets the event loop turn. A Worker that imports it and then
 * installs its `message` handler would otherwise lose the messages sent to
 * it meanwhile (the Worker API delivers them to no handler).
 *
 * @module
 */

import { PREBUILT_SHIMS, type PrebuiltShim } from "./prebuilt.ts";
import {
  cacheFor,
  cachePermissions,
  PACKAGE_VERSION,
  platformKey,
  readCached,
  trustedPrivateDir,
  writeAtomically,
} from "./shim_cache.ts";
import { download, timeoutMs } from "./shim_download.ts";
import {
  granted,
  missingFfi,
  type MissingPermission,
  missingPermissionsError,
} from "./shim_permissions.ts";

// Importable from here too, for install.ts.
export { PACKAGE_VERSION, platformKey };

/** Where a shim file came from. */
export type ShimOrigin = "MTC_SHIM_PATH" | "checkout" | "cache" | "download";

/** A shim file ready to be opened. */
export interface ShimFile {
  /** Where the shim comes from: the override, the checkout's file or the cache entry. */
  readonly path: string;
  /**
   * The path to open: `path`, or for a cached shim a private copy of the
   * bytes that were verified.
   */
  readonly openPath: string;
  /** How it was found. */
  readonly origin: ShimOrigin;
  /** Removes the private copy (once it is loaded, or not needed); idempotent. */
  release(): void;
}

/** Where {@linkcode locateShim} looks; tests point it at other places. */
export interface ShimSearch {
  /** The URL of the package's `ffi/` directory (defaults to this module's). */
  readonly moduleUrl?: string | URL;
  /** Environment lookup (defaults to `Deno.env.get` where granted). */
  readonly env?: (name: string) => string | undefined;
  /** The prebuilt binaries to trust (defaults to `prebuilt.ts`). */
  readonly prebuilt?: Readonly<Record<string, PrebuiltShim>>;
  /** This machine's `<os>-<arch>` (defaults to {@linkcode platformKey}). */
  readonly platform?: string;
  /** The download's time limit (defaults to `MTC_DOWNLOAD_TIMEOUT_MS`, else 30 000). */
  readonly downloadTimeoutMs?: number;
}

const LOADING = "Loading the @mtc/core native shim";
const INSTALLING = "Installing the @mtc/core native shim";

function readEnv(name: string): string | undefined {
  // Ask first: reading an ungranted variable would prompt on a terminal.
  return granted({ name: "env", variable: name }) ? Deno.env.get(name) : undefined;
}

/**
 * The local path of the shim for this process, ready to open; call
 * `release()` on it once it is opened.
 *
 * @throws {Error} naming the path or URL, the reason and the fix (every
 * missing permission at once, as flags)
 */
export async function locateShim(search: ShimSearch = {}): Promise<ShimFile> {
  const env = search.env ?? readEnv;
  const override = env("MTC_SHIM_PATH");
  if (override) {
    requirePermissions(LOADING, [missingFfi(override)]);
    const path = checkedOverride(override);
    // dlopen() looks a name without a slash up in the system's library
    // path, not in the working directory where it was just checked: another
    // library of that name would be loaded, or none.
    const openPath = path.includes("/") ? path : `./${path}`;
    return { path, openPath, origin: "MTC_SHIM_PATH", release() {} };
  }
  const { shim, url, platform } = prebuiltFor(search);
  if (url.protocol === "file:") {
    const path = fromFileUrl(url);
    requirePermissions(LOADING, [missingFfi(path)]);
    return { path, openPath: path, origin: "checkout", release() {} };
  }
  const cache = cacheFor(env, shim, platform);
  const cached = readCached(cache, shim);
  requirePermissions(LOADING, [...cachePermissions(cache, url, cached), missingFfi(cache.dir)]);
  const privateDir = trustedPrivateDir(cache);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    try {
      Deno.removeSync(privateDir, { recursive: true });
    } catch {
      // Left behind: a few kilobytes in the user's own cache, harmless.
    }
  };
  try {
    let bytes = cached;
    let origin: ShimOrigin = "cache";
    if (!bytes) {
      bytes = await download(url, shim, cache.file, timeoutMs(search, env));
      await writeAtomically(cache, bytes);
      origin = "download";
    }
    // The bytes just verified, in a directory no one else can write: what
    // is opened is what was checked, whatever happens to the cache path.
    const openPath = `${privateDir}/libmtc.so`;
    Deno.writeFileSync(openPath, bytes, { createNew: true, mode: 0o500 });
    return { path: cache.file, openPath, origin, release };
  } catch (error) {
    release();
    throw error;
  }
}

/** What {@linkcode installShim} did. */
export interface InstalledShim {
  /** The shim file: the cache entry, or a checkout's committed binary. */
  readonly path: string;
  /** `"download"` (fetched now), `"cache"` (already there, verified) or `"checkout"`. */
  readonly origin: "download" | "cache" | "checkout";
  /** Where it was fetched from (or would be). */
  readonly url: string;
}

/**
 * Fills the user cache with the verified shim for this platform, without
 * loading it: what a machine with network does for nodes without (they
 * share the home directory). A checkout needs nothing: its committed
 * binary is used.
 *
 * @throws {Error} as {@linkcode locateShim}
 */
export async function installShim(search: ShimSearch = {}): Promise<InstalledShim> {
  const env = search.env ?? readEnv;
  const { shim, url, platform } = prebuiltFor(search);
  if (url.protocol === "file:") {
    return { path: fromFileUrl(url), origin: "checkout", url: url.href };
  }
  const cache = cacheFor(env, shim, platform);
  const cached = readCached(cache, shim);
  requirePermissions(INSTALLING, cachePermissions(cache, url, cached));
  Deno.removeSync(trustedPrivateDir(cache), { recursive: true });
  if (cached) return { path: cache.file, origin: "cache", url: url.href };
  const bytes = await download(url, shim, cache.file, timeoutMs(search, env));
  await writeAtomically(cache, bytes);
  return { path: cache.file, origin: "download", url: url.href };
}

function requirePermissions(action: string, needs: (MissingPermission | undefined)[]): void {
  const missing = needs.filter((need) => need !== undefined);
  if (missing.length > 0) throw missingPermissionsError(action, missing);
}

function prebuiltFor(search: ShimSearch): { shim: PrebuiltShim; url: URL; platform: string } {
  const prebuilt = search.prebuilt ?? PREBUILT_SHIMS;
  const platform = search.platform ?? platformKey();
  const shim = prebuilt[platform];
  if (!shim) {
    if (!platform.startsWith("linux-")) {
      // CUDA on macOS and Windows is not supported by this package: no
      // advice to build what cannot be used.
      throw new Error(
        `@mtc/core uses CUDA GPUs on Linux (x86_64, aarch64) only; on ${platform} it runs on the CPU target`,
      );
    }
    throw new Error(
      `@mtc/core has no prebuilt native shim for ${platform} (there are: ${
        Object.keys(prebuilt).join(", ") || "none"
      }); build one from a checkout with "deno task build" and set MTC_SHIM_PATH to it`,
    );
  }
  const base = new URL(search.moduleUrl ?? new URL(".", import.meta.url));
  return { shim, url: new URL(`../native/prebuilt/${shim.file}`, base), platform };
}

function checkedOverride(path: string): string {
  // Without read permission the open itself reports a missing file.
  if (!granted({ name: "read", path })) return path;
  try {
    const info = Deno.statSync(path);
    if (!info.isFile) throw new Error("not a file");
  } catch (error) {
    throw new Error(
      `Invalid MTC_SHIM_PATH: expected a readable file, got "${path}" (${
        (error as Error).message
      }): point it at a libmtc.so built with "deno task build", or unset it to use the prebuilt shim`,
      { cause: error },
    );
  }
  return path;
}

function fromFileUrl(url: URL): string {
  return decodeURIComponent(url.pathname);
}
