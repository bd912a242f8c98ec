/**
 * Finds the native shim's file for every kind of import, without a toolkit.
 *
 * In this order:
 * 1. `MTC_SHIM_PATH`, when set (and `--allow-env` lets it be read);
 * 2. for a `file:` module (a checkout), the committed binary
 *    `native/prebuilt/<os>-<arch>/libmtc.so` beside this package;
 * 3. for a remote module (`jsr:`, `https:`, `http:`), a copy in the per-user
 *    cache (`$XDG_CACHE_HOME`, else `~/.cache`, under
 *    `mtc-core/<version>/abi<N>/<os>-<arch>/`), filled on first use by
 *    fetching the same committed binary from beside the module, checked
 *    against the SHA-256 in `prebuilt.ts`, written under a temporary name and
 *    renamed, so that two processes starting at once cannot leave a torn
 *    file. A cached copy is hashed before every load; a corrupt one is
 *    replaced, never loaded. After the first run this works offline.
 *
 * Every failure is an `Error` that names the path or URL and what to do,
 * including the permission flag that is missing.
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
import { sha256HexSync } from "./sha256.ts";
import { ABI_VERSION } from "./symbols.ts";

/** The package version; it keys the cache directory (checked against deno.json by a test). */
export const PACKAGE_VERSION = "0.2.0";

/** Where a shim file came from. */
export type ShimOrigin = "MTC_SHIM_PATH" | "checkout" | "cache" | "download";

/** A shim file ready to be opened. */
export interface ShimFile {
  /** Its local path. */
  readonly path: string;
  /** How it was found. */
  readonly origin: ShimOrigin;
}

/** Where {@linkcode locateShim} looks; tests point it at other places. */
export interface ShimSearch {
  /** The URL of the package's `ffi/` directory (defaults to this module's). */
  readonly moduleUrl?: string | URL;
  /** Environment lookup (defaults to `Deno.env.get`). */
  readonly env?: (name: string) => string | undefined;
  /** The prebuilt binaries to trust (defaults to `prebuilt.ts`). */
  readonly prebuilt?: Readonly<Record<string, PrebuiltShim>>;
}

/** This machine's key in `PREBUILT_SHIMS`, e.g. `"linux-x86_64"`. */
export function platformKey(): string {
  return `${Deno.build.os}-${Deno.build.arch}`;
}

const ENV_NAMES = "MTC_SHIM_PATH,XDG_CACHE_HOME,HOME";

function readEnv(name: string): string | undefined {
  // Ask first: reading an ungranted variable would prompt on a terminal.
  if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
    return undefined;
  }
  try {
    return Deno.env.get(name);
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) return undefined;
    throw error;
  }
}

function isNotCapable(error: unknown): boolean {
  return error instanceof Deno.errors.NotCapable;
}

/**
 * The local path of the shim for this process.
 *
 * @throws {Error} naming the path or URL, the reason and the fix
 */
export async function locateShim(search: ShimSearch = {}): Promise<ShimFile> {
  const env = search.env ?? readEnv;
  const override = env("MTC_SHIM_PATH");
  if (override) return { path: checkedOverride(override), origin: "MTC_SHIM_PATH" };
  const prebuilt = search.prebuilt ?? PREBUILT_SHIMS;
  const platform = platformKey();
  const shim = prebuilt[platform];
  if (!shim) {
    throw new Error(
      `@mtc/core has no prebuilt native shim for ${platform} (there are: ${
        Object.keys(prebuilt).join(", ") || "none"
      }); build one from a checkout with "deno task build" and set MTC_SHIM_PATH to it`,
    );
  }
  const base = new URL(search.moduleUrl ?? new URL(".", import.meta.url));
  const url = new URL(`../native/prebuilt/${shim.file}`, base);
  if (url.protocol === "file:") return { path: fromFileUrl(url), origin: "checkout" };
  return await cachedCopy(url, shim, cacheRoot(env));
}

function checkedOverride(path: string): string {
  try {
    const info = Deno.statSync(path);
    if (!info.isFile) throw new Error("not a file");
  } catch (error) {
    if (isNotCapable(error)) {
      throw new Error(
        `Reading the @mtc/core native shim at MTC_SHIM_PATH="${path}" needs --allow-read=${path}`,
        { cause: error },
      );
    }
    throw new Error(
      `MTC_SHIM_PATH="${path}" is not a readable file (${
        (error as Error).message
      }): point it at a libmtc.so built with "deno task build", or unset it to use the prebuilt shim`,
      { cause: error },
    );
  }
  return path;
}

function cacheRoot(env: (name: string) => string | undefined): string {
  const xdg = env("XDG_CACHE_HOME");
  if (xdg) return xdg;
  const home = env("HOME");
  if (home) return `${home}/.cache`;
  throw new Error(
    `@mtc/core keeps its native shim in the user cache, but neither XDG_CACHE_HOME nor HOME can be read: run with --allow-env=${ENV_NAMES} (and set one of them), or set MTC_SHIM_PATH`,
  );
}

/** The cache path of a prebuilt shim (version, ABI, platform and hash in the name). */
export function cachePath(root: string, shim: PrebuiltShim, platform = platformKey()): string {
  return `${root}/mtc-core/${PACKAGE_VERSION}/abi${ABI_VERSION}/${platform}/libmtc-${
    shim.sha256.slice(0, 16)
  }.so`;
}

async function cachedCopy(url: URL, shim: PrebuiltShim, root: string): Promise<ShimFile> {
  const path = cachePath(root, shim);
  const dir = path.slice(0, path.lastIndexOf("/"));
  let cached: Uint8Array | undefined;
  try {
    cached = Deno.readFileSync(path);
  } catch (error) {
    if (isNotCapable(error)) {
      throw new Error(
        `Reading the cached @mtc/core native shim needs --allow-read=${root}/mtc-core (the cache, ${path})`,
        { cause: error },
      );
    }
    if (!(error instanceof Deno.errors.NotFound)) throw unusableCache(path, root, error);
  }
  if (cached && sha256HexSync(cached) === shim.sha256) return { path, origin: "cache" };
  // Missing, truncated or corrupt: fetch a fresh copy and replace it.
  const bytes = await download(url, shim, path);
  await writeAtomically(dir, path, bytes, root);
  return { path, origin: "download" };
}

async function download(url: URL, shim: PrebuiltShim, path: string): Promise<Uint8Array> {
  let response: Response;
  try {
    response = await fetch(url);
  } catch (error) {
    if (isNotCapable(error)) {
      throw new Error(
        `Downloading the @mtc/core native shim once (to ${path}) needs --allow-net=${url.host}`,
        { cause: error },
      );
    }
    throw new Error(
      `Cannot download the @mtc/core native shim from ${url.href} (${error}): run once with network access, or set MTC_SHIM_PATH to a libmtc.so`,
      { cause: error },
    );
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(
      `Cannot download the @mtc/core native shim from ${url.href}: HTTP ${response.status} ${response.statusText}`,
    );
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  const hash = sha256HexSync(bytes);
  if (hash !== shim.sha256) {
    throw new Error(
      `The @mtc/core native shim downloaded from ${url.href} failed its integrity check (${bytes.length} bytes, SHA-256 ${hash}; expected ${shim.bytes} bytes, ${shim.sha256}): it was not loaded`,
    );
  }
  return bytes;
}

async function writeAtomically(
  dir: string,
  path: string,
  bytes: Uint8Array,
  root: string,
): Promise<void> {
  const temporary = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeFile(temporary, bytes, { mode: 0o755 });
    // rename() is atomic: a concurrent reader sees the old file or the new
    // one, never a partial one.
    await Deno.rename(temporary, path);
  } catch (error) {
    await Deno.remove(temporary).catch(() => {});
    if (isNotCapable(error)) {
      throw new Error(
        `Caching the @mtc/core native shim at ${path} needs --allow-write=${root}/mtc-core`,
        { cause: error },
      );
    }
    throw unusableCache(path, root, error);
  }
}

function unusableCache(path: string, root: string, error: unknown): Error {
  return new Error(
    `Cannot use the @mtc/core native shim cache at ${path} (${error}): make ${root} a writable directory, set XDG_CACHE_HOME to one, or set MTC_SHIM_PATH`,
    { cause: error },
  );
}

function fromFileUrl(url: URL): string {
  return decodeURIComponent(url.pathname);
}
