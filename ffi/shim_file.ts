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
 * A cached shim is read once and hashed at every load, and the bytes that
 * were hashed are the bytes that get loaded: they are written into a fresh
 * private directory (mode 0700, a random name) and opened from there, never
 * from the cache path, which another process could swap between the check
 * and the open. The cache directories and file must belong to this user
 * (or root) and be writable by no one else; else they are refused.
 *
 * The download is bounded: at most `MTC_DOWNLOAD_TIMEOUT_MS` (default
 * 30 000) for the whole answer, body included, and no more bytes than the
 * expected size. Every permission is asked with `querySync` before the call
 * that needs it (see `shim_permissions.ts`), so that nothing prompts, and
 * what is missing is reported at once. Every failure is an `Error` that
 * names the path or URL and what to do.
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
import {
  granted,
  missingFfi,
  type MissingPermission,
  missingPermissionsError,
  pathFlag,
  shellWord,
} from "./shim_permissions.ts";
import { ABI_VERSION } from "./symbols.ts";

/** The package version; it keys the cache directory (checked against deno.json by a test). */
export const PACKAGE_VERSION = "0.3.0";

/** The download's default time limit, connection to last byte (`MTC_DOWNLOAD_TIMEOUT_MS`). */
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 30_000;

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

/** This machine's key in `PREBUILT_SHIMS`, e.g. `"linux-x86_64"`. */
export function platformKey(): string {
  return `${Deno.build.os}-${Deno.build.arch}`;
}

/** The variables the shim's lookup reads. */
export const SHIM_ENV_NAMES = "MTC_SHIM_PATH,XDG_CACHE_HOME,HOME";

const LOADING = "Loading the @mtc/core native shim";
const INSTALLING = "Installing the @mtc/core native shim";
const INSTALL_HINT =
  'on a node without network, fetch it beforehand with "deno run <flags> jsr:@mtc/core/install" (README: "Offline GPU nodes"), or set MTC_SHIM_PATH to a libmtc.so';

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

/** The cache's paths; `known` is false where the cache root could not be read from the environment. */
interface CacheLocation {
  readonly known: boolean;
  /** `<root>/mtc-core` (the directory the permissions name). */
  readonly dir: string;
  /** The directories from `dir` down to the platform's, in order. */
  readonly chain: readonly string[];
  /** The cached shim. */
  readonly file: string;
}

function cacheFor(
  env: (name: string) => string | undefined,
  shim: PrebuiltShim,
  platform: string,
): CacheLocation {
  // Relative values are ignored, as the XDG spec asks: they named a cache
  // under whatever the working directory happened to be.
  const xdg = absolute(env("XDG_CACHE_HOME"));
  const home = absolute(env("HOME"));
  const root = xdg ?? (home ? `${home}/.cache` : undefined);
  const file = cachePath(root ?? "$HOME/.cache", shim, platform);
  const dir = `${root ?? "$HOME/.cache"}/mtc-core`;
  const chain = [dir];
  for (const part of [PACKAGE_VERSION, `abi${ABI_VERSION}`, platform]) {
    chain.push(`${chain[chain.length - 1]}/${part}`);
  }
  return { known: root !== undefined, dir, chain, file };
}

function absolute(path: string | undefined): string | undefined {
  return path?.startsWith("/") ? path : undefined;
}

/** The cache path of a prebuilt shim (version, ABI, platform and hash in the name). */
export function cachePath(root: string, shim: PrebuiltShim, platform = platformKey()): string {
  return `${root}/mtc-core/${PACKAGE_VERSION}/abi${ABI_VERSION}/${platform}/libmtc-${
    shim.sha256.slice(0, 16)
  }.so`;
}

/** The cached shim's bytes when they are there, readable and match the SHA-256; else undefined. */
function readCached(cache: CacheLocation, shim: PrebuiltShim): Uint8Array | undefined {
  if (!cache.known || !granted({ name: "read", path: cache.dir })) return undefined;
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(cache.file);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw unusableCache(cache, error);
  }
  // Missing, truncated or corrupt: fetched again and replaced, never loaded.
  return bytes.length === shim.bytes && sha256HexSync(bytes) === shim.sha256 ? bytes : undefined;
}

function cachePermissions(
  cache: CacheLocation,
  url: URL,
  cached: Uint8Array | undefined,
): (MissingPermission | undefined)[] {
  const needs: (MissingPermission | undefined)[] = [];
  if (!cache.known) {
    needs.push({
      flag: `--allow-env=${SHIM_ENV_NAMES}`,
      why: "env: find the user cache (XDG_CACHE_HOME, else HOME)",
    });
  }
  if (!cache.known || !granted({ name: "read", path: cache.dir })) {
    needs.push({ flag: pathFlag("read", cache.dir), why: "read: the cached shim" });
  }
  if (!cache.known || !granted({ name: "write", path: cache.dir })) {
    needs.push({
      flag: pathFlag("write", cache.dir),
      why: "write: cache the shim, and copy it privately to load it",
    });
  }
  if (!cached && !granted({ name: "net", host: url.host })) {
    needs.push({
      flag: `--allow-net=${url.host}`,
      why: `net: download the shim once (not needed after "jsr:@mtc/core/install")`,
    });
  }
  return needs;
}

/**
 * Creates the cache's directories (mode 0700), then a fresh private
 * directory in the platform's, and refuses the cache unless every
 * directory on the way, and the cached file, belong to this user (or root)
 * and are writable by no one else. The private directory, made by this
 * process, tells which user that is (`Deno.uid()` would need `--allow-sys`).
 */
function trustedPrivateDir(cache: CacheLocation): string {
  const platformDir = cache.chain[cache.chain.length - 1];
  let privateDir: string;
  try {
    Deno.mkdirSync(platformDir, { recursive: true, mode: 0o700 });
    privateDir = Deno.makeTempDirSync({ dir: platformDir, prefix: ".load-" });
  } catch (error) {
    throw unusableCache(cache, error);
  }
  try {
    const uid = Deno.statSync(privateDir).uid;
    for (const path of [...cache.chain, cache.file]) checkPrivate(path, uid);
  } catch (error) {
    Deno.removeSync(privateDir, { recursive: true });
    throw error;
  }
  sweepStalePrivateDirs(platformDir, privateDir);
  return privateDir;
}

/**
 * How old a private copy must be before another process removes it: a
 * process loads its copy within milliseconds of making it, so one this old
 * was left by a process that died in between (killed, or out of memory).
 */
export const STALE_PRIVATE_COPY_MS = 10 * 60 * 1000;

// Private copies left by processes that died between making and loading
// them would pile up in the cache, one per death; each import sweeps them.
function sweepStalePrivateDirs(platformDir: string, own: string): void {
  const now = Date.now();
  try {
    for (const entry of Deno.readDirSync(platformDir)) {
      if (!entry.isDirectory || !entry.name.startsWith(".load-")) continue;
      const path = `${platformDir}/${entry.name}`;
      if (path === own) continue;
      const modified = Deno.statSync(path).mtime?.getTime() ?? now;
      if (now - modified >= STALE_PRIVATE_COPY_MS) Deno.removeSync(path, { recursive: true });
    }
  } catch {
    // Another process swept it first, or it vanished: nothing to do.
  }
}

function checkPrivate(path: string, uid: number | null): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return; // the file, not cached yet
    throw error;
  }
  const fix =
    "so another user could replace the shim; fix that, or set XDG_CACHE_HOME to a directory of your own, or MTC_SHIM_PATH";
  if (uid !== null && info.uid !== null && info.uid !== uid && info.uid !== 0) {
    throw new Error(
      `Cannot trust the @mtc/core native shim cache: ${path} belongs to user ${info.uid}, not to this process's user (${uid}), ${fix}`,
    );
  }
  if (info.mode !== null && (info.mode & 0o022) !== 0) {
    throw new Error(
      `Cannot trust the @mtc/core native shim cache: ${path} is writable by ${
        info.mode & 0o002 ? "everyone" : "its group"
      } (mode ${(info.mode & 0o7777).toString(8).padStart(4, "0")}), ${fix} (chmod go-w ${
        shellWord(path)
      })`,
    );
  }
}

function timeoutMs(search: ShimSearch, env: (name: string) => string | undefined): number {
  if (search.downloadTimeoutMs !== undefined) return search.downloadTimeoutMs;
  const text = env("MTC_DOWNLOAD_TIMEOUT_MS");
  if (text === undefined || text === "") return DEFAULT_DOWNLOAD_TIMEOUT_MS;
  const value = Number(text);
  if (!(value >= 1)) {
    throw new Error(
      `Invalid MTC_DOWNLOAD_TIMEOUT_MS: expected a number of milliseconds >= 1, got "${text}"`,
    );
  }
  return value;
}

/** The longest delay `setTimeout` keeps (2^31 - 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Fetches the shim: the whole answer within `limitMs`, at most the expected
 * number of bytes, and only bytes whose SHA-256 matches.
 */
async function download(
  url: URL,
  shim: PrebuiltShim,
  path: string,
  limitMs: number,
): Promise<Uint8Array> {
  const controller = new AbortController();
  // A timer's delay is a signed 32-bit count of ms: a longer one (or
  // Infinity) fires at once, which aborted every download. Longer limits
  // wait the longest a timer can (24.8 days); Infinity sets none.
  const timer = limitMs === Infinity
    ? undefined
    : setTimeout(() => controller.abort(), Math.min(limitMs, MAX_TIMER_MS));
  const seconds = limitMs >= 1000 ? `${+(limitMs / 1000).toFixed(1)} s` : `${limitMs} ms`;
  let bytes: Uint8Array;
  try {
    bytes = await fetchAtMost(url, shim.bytes, controller.signal);
  } catch (error) {
    if (controller.signal.aborted) {
      throw new Error(
        `Cannot download the @mtc/core native shim from ${url.href} (to ${path}): no complete answer within ${seconds} (MTC_DOWNLOAD_TIMEOUT_MS sets the limit); ${INSTALL_HINT}`,
        { cause: error },
      );
    }
    throw new Error(
      `Cannot download the @mtc/core native shim from ${url.href} (${
        (error as Error).message
      }); ${INSTALL_HINT}`,
      { cause: error },
    );
  } finally {
    clearTimeout(timer);
  }
  const hash = sha256HexSync(bytes);
  if (hash !== shim.sha256) {
    throw new Error(
      `The @mtc/core native shim downloaded from ${url.href} failed its integrity check (${bytes.length} bytes, SHA-256 ${hash}; expected ${shim.bytes} bytes, ${shim.sha256}): it was not loaded`,
    );
  }
  return bytes;
}

async function fetchAtMost(url: URL, limit: number, signal: AbortSignal): Promise<Uint8Array> {
  const response = await fetch(url, { signal });
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`HTTP ${response.status} ${response.statusText}`);
  }
  const declared = Number(response.headers.get("content-length") ?? NaN);
  if (declared > limit) {
    await response.body?.cancel();
    throw new Error(`it is ${declared} bytes, more than the ${limit} expected`);
  }
  // A 2xx answer with no body: no bytes (the integrity check then names it).
  if (response.body === null) return new Uint8Array(0);
  const out = new Uint8Array(limit);
  let length = 0;
  const reader = response.body.getReader();
  try {
    for (;;) {
      // A body that never ends is cut by the signal (the read rejects).
      const { done, value } = await reader.read();
      if (done) break;
      if (length + value.length > limit) {
        throw new Error(`it is more than the ${limit} bytes expected`);
      }
      out.set(value, length);
      length += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return out.subarray(0, length);
}

async function writeAtomically(cache: CacheLocation, bytes: Uint8Array): Promise<void> {
  const temporary = `${cache.file}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeFile(temporary, bytes, { createNew: true, mode: 0o644 });
    // rename() is atomic: a concurrent reader sees the old file or the new
    // one, never a partial one.
    await Deno.rename(temporary, cache.file);
  } catch (error) {
    await Deno.remove(temporary).catch(() => {});
    throw unusableCache(cache, error);
  }
}

function unusableCache(cache: CacheLocation, error: unknown): Error {
  return new Error(
    `Cannot use the @mtc/core native shim cache at ${cache.file} (${error}): make ${cache.dir} a writable directory, set XDG_CACHE_HOME to one, or set MTC_SHIM_PATH`,
    { cause: error },
  );
}

function fromFileUrl(url: URL): string {
  return decodeURIComponent(url.pathname);
}
