/**
 * Fetching the native shim from beside a remote module, bounded: the whole
 * answer within a time limit, no more bytes than expected, and only bytes
 * whose SHA-256 matches `prebuilt.ts` are returned (nothing unchecked is
 * ever written to the cache or loaded).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { download } from "./shim_download.ts";
 * const shim = { file: "x/libmtc.so", bytes: 4, sha256: "00".repeat(32) };
 * // No server answers there: the error names the URL and what to do.
 * await assert.rejects(
 *   download(new URL("http://127.0.0.1:9/libmtc.so"), shim, "/tmp/libmtc.so", 1000),
 *   /Cannot download the @mtc\/core native shim from http:\/\/127\.0\.0\.1:9\/libmtc\.so/,
 * );
 * ```
 *
 * @module
 */

import type { PrebuiltShim } from "./prebuilt.ts";
import { sha256HexSync } from "./sha256.ts";

const INSTALL_HINT =
  'on a node without network, fetch it beforehand with "deno run <flags> jsr:@mtc/core/install" (README: "Offline GPU nodes"), or set MTC_SHIM_PATH to a libmtc.so';

/** The longest delay `setTimeout` keeps (2^31 - 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Fetches the shim: the whole answer within `limitMs`, at most the expected
 * number of bytes, and only bytes whose SHA-256 matches.
 */
export async function download(
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

/** The download's default time limit, connection to last byte (`MTC_DOWNLOAD_TIMEOUT_MS`). */
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 30_000;

/**
 * The download's time limit: the caller's, else `MTC_DOWNLOAD_TIMEOUT_MS`,
 * else {@linkcode DEFAULT_DOWNLOAD_TIMEOUT_MS}.
 *
 * @throws {Error} for a variable that is no number of milliseconds >= 1
 */
export function timeoutMs(
  search: { readonly downloadTimeoutMs?: number },
  env: (name: string) => string | undefined,
): number {
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
