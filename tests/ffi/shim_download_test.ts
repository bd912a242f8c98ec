import assert from "node:assert/strict";
import { PREBUILT_SHIMS } from "../../ffi/prebuilt.ts";
import { platformKey } from "../../ffi/shim_cache.ts";
import { DEFAULT_DOWNLOAD_TIMEOUT_MS, download, timeoutMs } from "../../ffi/shim_download.ts";
import { servePackage } from "./_package_server.ts";

// Through locateShim (servers that never answer, endless and oversized
// bodies, empty answers, timer limits past 2^31 ms, nothing cached after a
// refused download): tests/ffi/shim_file_test.ts. Here, download() itself
// against the package server that remote-import tests use.

const shim = PREBUILT_SHIMS[platformKey()];
const root = new URL("../../", import.meta.url);
const shimBytes = await Deno.readFile(new URL(`native/prebuilt/${shim.file}`, root));

Deno.test("a download returns exactly the served shim's bytes when they match prebuilt.ts", async () => {
  const server = servePackage();
  try {
    const url = new URL(`native/prebuilt/${shim.file}`, server.url);
    const bytes = await download(url, shim, "/tmp/unused", 10_000);
    assert.deepEqual(bytes, shimBytes);
    assert.equal(server.shimRequests(), 1);
  } finally {
    await server.close();
  }
});

Deno.test("a corrupted download is refused, naming the URL, both sizes and both hashes", async () => {
  const server = servePackage("corrupt");
  const url = new URL(`native/prebuilt/${shim.file}`, server.url);
  try {
    await assert.rejects(download(url, shim, "/tmp/unused", 10_000), (error: Error) => {
      assert.ok(
        error.message.startsWith(
          `The @mtc/core native shim downloaded from ${url.href} failed its integrity check (${shim.bytes} bytes, SHA-256 `,
        ),
        error.message,
      );
      assert.ok(
        error.message.includes(`expected ${shim.bytes} bytes, ${shim.sha256}): it was not loaded`),
      );
      assert.doesNotMatch(error.message, new RegExp(`SHA-256 ${shim.sha256}`));
      return true;
    });
  } finally {
    await server.close();
  }
});

Deno.test("an HTTP error is named with its status, and the way to install offline", async () => {
  const server = servePackage();
  const url = new URL("native/prebuilt/no-such-platform/libmtc.so", server.url);
  try {
    await assert.rejects(download(url, shim, "/tmp/unused", 10_000), (error: Error) => {
      assert.ok(
        error.message.startsWith(
          `Cannot download the @mtc/core native shim from ${url.href} (HTTP 404 Not Found); `,
        ),
        error.message,
      );
      assert.match(error.message, /jsr:@mtc\/core\/install.*MTC_SHIM_PATH/);
      return true;
    });
  } finally {
    await server.close();
  }
});

Deno.test("an answer declaring more bytes than the shim has is refused before its body is read", async () => {
  const server = servePackage();
  const url = new URL(`native/prebuilt/${shim.file}`, server.url);
  const smaller = { ...shim, bytes: 100 };
  try {
    await assert.rejects(
      download(url, smaller, "/tmp/unused", 10_000),
      new RegExp(`\\(it is ${shim.bytes} bytes, more than the 100 expected\\)`),
    );
  } finally {
    await server.close();
  }
});

Deno.test("a time limit of a second or more is named in seconds, with the path it was for", async () => {
  const server = servePackage("never");
  const url = new URL(`native/prebuilt/${shim.file}`, server.url);
  try {
    await assert.rejects(download(url, shim, "/cache/libmtc.so", 1000), (error: Error) => {
      assert.ok(
        error.message.startsWith(
          `Cannot download the @mtc/core native shim from ${url.href} (to /cache/libmtc.so): no complete answer within 1 s (MTC_DOWNLOAD_TIMEOUT_MS sets the limit); `,
        ),
        error.message,
      );
      return true;
    });
  } finally {
    await server.close();
  }
});

Deno.test("the time limit is the caller's, else MTC_DOWNLOAD_TIMEOUT_MS, else 30 s", () => {
  const env = (value?: string) => (name: string) =>
    name === "MTC_DOWNLOAD_TIMEOUT_MS" ? value : undefined;
  assert.equal(DEFAULT_DOWNLOAD_TIMEOUT_MS, 30_000);
  assert.equal(timeoutMs({}, env()), 30_000);
  assert.equal(timeoutMs({}, env("")), 30_000);
  assert.equal(timeoutMs({}, env("250")), 250);
  assert.equal(timeoutMs({}, env("Infinity")), Infinity);
  assert.equal(timeoutMs({ downloadTimeoutMs: 5 }, env("250")), 5);
});

Deno.test("MTC_DOWNLOAD_TIMEOUT_MS below 1 ms or not a number is refused, naming the value", () => {
  for (const bad of ["0", "-5", "0.5", "soon", "NaN", "1e"]) {
    assert.throws(
      () => timeoutMs({}, (name) => name === "MTC_DOWNLOAD_TIMEOUT_MS" ? bad : undefined),
      {
        message:
          `Invalid MTC_DOWNLOAD_TIMEOUT_MS: expected a number of milliseconds >= 1, got "${bad}"`,
      },
    );
  }
});
