/**
 * The per-user cache of the native shim, for remote imports (`jsr:`,
 * `https:`): `$XDG_CACHE_HOME` (else `$HOME/.cache`) under
 * `mtc-core/<version>/abi<N>/<os>-<arch>/`. A cached shim is loaded only
 * when its bytes match the SHA-256 in `prebuilt.ts`, and only from a fresh
 * private copy of those bytes (the cache path could be swapped between the
 * check and the open); the directories and the file must belong to this
 * user (or root) and be writable by no one else. New shims are written
 * under a temporary name and renamed, so that two processes starting at
 * once cannot leave a torn file. ffi/shim_file.ts decides when the cache is
 * used.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cachePath } from "./shim_cache.ts";
 * const shim = { file: "linux-x86_64/libmtc.so", bytes: 1, sha256: "ab".repeat(32) };
 * assert.match(cachePath("/home/me/.cache", shim, "linux-x86_64"), /^\/home\/me\/\.cache\/mtc-core\//);
 * ```
 *
 * @module
 */

import type { PrebuiltShim } from "./prebuilt.ts";
import { sha256HexSync } from "./sha256.ts";
import { granted, type MissingPermission, pathFlag, shellWord } from "./shim_permissions.ts";
import { ABI_VERSION } from "./symbols.ts";

/** The package version; it keys the cache directory (checked against deno.json by a test). */
export const PACKAGE_VERSION = "0.3.0";

/** This machine's key in `PREBUILT_SHIMS`, e.g. `"linux-x86_64"`. */
export function platformKey(): string {
  return `${Deno.build.os}-${Deno.build.arch}`;
}

/** The cache's paths; `known` is false where the cache root could not be read from the environment. */
export interface CacheLocation {
  readonly known: boolean;
  /** `<root>/mtc-core` (the directory the permissions name). */
  readonly dir: string;
  /** The directories from `dir` down to the platform's, in order. */
  readonly chain: readonly string[];
  /** The cached shim. */
  readonly file: string;
}

export function cacheFor(
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
export function readCached(cache: CacheLocation, shim: PrebuiltShim): Uint8Array | undefined {
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

/**
 * Creates the cache's directories (mode 0700), then a fresh private
 * directory in the platform's, and refuses the cache unless every
 * directory on the way, and the cached file, belong to this user (or root)
 * and are writable by no one else. The private directory, made by this
 * process, tells which user that is (`Deno.uid()` would need `--allow-sys`).
 */
export function trustedPrivateDir(cache: CacheLocation): string {
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

export async function writeAtomically(cache: CacheLocation, bytes: Uint8Array): Promise<void> {
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

export function unusableCache(cache: CacheLocation, error: unknown): Error {
  return new Error(
    `Cannot use the @mtc/core native shim cache at ${cache.file} (${error}): make ${cache.dir} a writable directory, set XDG_CACHE_HOME to one, or set MTC_SHIM_PATH`,
    { cause: error },
  );
}

/** The variables the shim's lookup reads. */
export const SHIM_ENV_NAMES = "MTC_SHIM_PATH,XDG_CACHE_HOME,HOME";

/** The permissions that using the cache needs and this process lacks (undefined: granted). */
export function cachePermissions(
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
