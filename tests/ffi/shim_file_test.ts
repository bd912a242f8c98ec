import assert from "node:assert/strict";
import { PREBUILT_SHIMS } from "../../ffi/prebuilt.ts";
import { cachePath, locateShim, platformKey } from "../../ffi/shim_file.ts";
import { subtleSha256Hex as sha256Hex } from "./_subtle_sha256.ts";

const root = new URL("../../", import.meta.url).pathname;
const platform = platformKey();
const shim = PREBUILT_SHIMS[platform];
const shimBytes = await Deno.readFile(`${root}native/prebuilt/${shim.file}`);

/**
 * Serves the package's `native/prebuilt/` over HTTP on 127.0.0.1, as a
 * remote import would reach it; counts the requests.
 */
function servePrebuilt(body: (path: string) => Uint8Array | undefined = () => shimBytes) {
  let requests = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    requests++;
    const path = new URL(request.url).pathname;
    const bytes = path === `/native/prebuilt/${shim.file}` ? body(path) : undefined;
    return bytes
      ? new Response(bytes as Uint8Array<ArrayBuffer>)
      : new Response("", { status: 404 });
  });
  const moduleUrl = `http://127.0.0.1:${server.addr.port}/ffi/`;
  return { server, moduleUrl, requests: () => requests };
}

// For the tests that run without --allow-write (they cannot make their own).
const scratch = await Deno.makeTempDir();
globalThis.addEventListener("unload", () => Deno.removeSync(scratch, { recursive: true }));

function envFor(cache: string): (name: string) => string | undefined {
  return (name) => (name === "XDG_CACHE_HOME" ? cache : undefined);
}

Deno.test("a remote import downloads the shim once, checks it, and loads it from the cache after", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl, requests } = servePrebuilt();
  try {
    const first = await locateShim({ moduleUrl, env: envFor(cache) });
    assert.equal(first.origin, "download");
    assert.equal(first.path, cachePath(cache, shim));
    assert.equal(await sha256Hex(await Deno.readFile(first.path)), shim.sha256);
    const second = await locateShim({ moduleUrl, env: envFor(cache) });
    assert.equal(second.origin, "cache");
    assert.equal(requests(), 1);
    // No temporary file is left beside it.
    const dir = first.path.slice(0, first.path.lastIndexOf("/"));
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), [first.path.split("/").pop()]);
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("after the first download the shim is found with the server gone (offline)", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  await locateShim({ moduleUrl, env: envFor(cache) });
  await server.shutdown();
  try {
    const offline = await locateShim({ moduleUrl, env: envFor(cache) });
    assert.equal(offline.origin, "cache");
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a truncated or corrupt cached shim is replaced, never loaded", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl, requests } = servePrebuilt();
  try {
    const path = cachePath(cache, shim);
    await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    for (
      const broken of [
        shimBytes.slice(0, 1000),
        shimBytes.map((b, i) => i === 4096 ? b ^ 1 : b),
      ]
    ) {
      await Deno.writeFile(path, broken);
      const found = await locateShim({ moduleUrl, env: envFor(cache) });
      assert.equal(found.origin, "download");
      assert.equal(await sha256Hex(await Deno.readFile(path)), shim.sha256);
    }
    assert.equal(requests(), 2);
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a download that fails its SHA-256 check is refused and nothing is cached", async () => {
  const cache = await Deno.makeTempDir();
  const tampered = shimBytes.slice();
  tampered[100] ^= 0xff;
  const { server, moduleUrl } = servePrebuilt(() => tampered);
  try {
    await assert.rejects(locateShim({ moduleUrl, env: envFor(cache) }), (error: Error) => {
      assert.match(error.message, /failed its integrity check/);
      assert.match(error.message, new RegExp(`expected ${shim.bytes} bytes, ${shim.sha256}`));
      return true;
    });
    await assert.rejects(Deno.stat(cachePath(cache, shim)), Deno.errors.NotFound);
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("an unreachable server with an empty cache names the URL and the way out", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  await server.shutdown();
  try {
    await assert.rejects(locateShim({ moduleUrl, env: envFor(cache) }), (error: Error) => {
      assert.match(
        error.message,
        /Cannot download the @mtc\/core native shim from http:\/\/127\.0\.0\.1/,
      );
      assert.match(error.message, /MTC_SHIM_PATH/);
      return true;
    });
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a cache directory that cannot be written is an error naming the path", async () => {
  const parent = await Deno.makeTempDir();
  const cache = `${parent}/not-a-directory`;
  await Deno.writeTextFile(cache, "a file where the cache directory should be");
  const { server, moduleUrl } = servePrebuilt();
  try {
    await assert.rejects(locateShim({ moduleUrl, env: envFor(cache) }), (error: Error) => {
      assert.match(error.message, /Cannot use the @mtc\/core native shim cache/);
      assert.ok(error.message.includes(cachePath(cache, shim)));
      assert.match(error.message, /XDG_CACHE_HOME/);
      return true;
    });
  } finally {
    await server.shutdown();
    await Deno.remove(parent, { recursive: true });
  }
});

Deno.test("two processes' worth of concurrent first loads leave one whole file", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  try {
    const found = await Promise.all(
      Array.from({ length: 8 }, () => locateShim({ moduleUrl, env: envFor(cache) })),
    );
    assert.ok(found.every((f) => f.path === cachePath(cache, shim)));
    assert.equal(await sha256Hex(await Deno.readFile(cachePath(cache, shim))), shim.sha256);
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("without HOME or XDG_CACHE_HOME a remote import says which --allow-env it needs", async () => {
  await assert.rejects(
    locateShim({ moduleUrl: "http://127.0.0.1:65001/ffi/", env: () => undefined }),
    /--allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME/,
  );
});

Deno.test({
  name: "without --allow-net the first download names the flag and host",
  permissions: { net: false, read: true, write: true, env: true },
  async fn() {
    await assert.rejects(
      locateShim({ moduleUrl: "http://127.0.0.1:65001/ffi/", env: envFor(`${scratch}/net`) }),
      /needs --allow-net=127\.0\.0\.1:65001/,
    );
  },
});

Deno.test({
  name: "without --allow-write the first download names the flag and the cache directory",
  permissions: { net: ["127.0.0.1"], read: true, write: false, env: true },
  async fn() {
    const cache = `${scratch}/write`;
    const { server, moduleUrl } = servePrebuilt();
    try {
      await assert.rejects(
        locateShim({ moduleUrl, env: envFor(cache) }),
        new RegExp(`needs --allow-write=${cache}/mtc-core`),
      );
    } finally {
      await server.shutdown();
    }
  },
});

Deno.test("a platform with no prebuilt shim is told to build one", async () => {
  await assert.rejects(
    locateShim({ moduleUrl: "http://127.0.0.1:65001/ffi/", prebuilt: {}, env: () => undefined }),
    new RegExp(`no prebuilt native shim for ${platform}.*deno task build.*MTC_SHIM_PATH`),
  );
});

/**
 * Whether `promise` settles before a task queued now runs: what a Worker
 * importing the package needs, since a message that arrives while its
 * import waits on I/O is delivered to no handler.
 */
async function settlesWithoutTask(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  const done = promise.then(() => settled = true, () => settled = true);
  const channel = new MessageChannel();
  const task = new Promise((resolve) => channel.port1.onmessage = resolve);
  channel.port2.postMessage(0);
  await task;
  channel.port1.close();
  channel.port2.close();
  const before = settled;
  await done;
  return before;
}

Deno.test("the shim is found without waiting on I/O from a checkout, MTC_SHIM_PATH and the cache (a Worker's import loses no message)", async () => {
  const none = () => undefined;
  assert.equal(await settlesWithoutTask(locateShim({ env: none })), true, "checkout");
  const override = `${root}native/prebuilt/${shim.file}`;
  const env = (name: string) => (name === "MTC_SHIM_PATH" ? override : undefined);
  assert.equal(await settlesWithoutTask(locateShim({ env })), true, "MTC_SHIM_PATH");
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  try {
    // The first download does wait (fetch); the cached copy after it does not.
    assert.equal(await settlesWithoutTask(locateShim({ moduleUrl, env: envFor(cache) })), false);
    assert.equal(
      await settlesWithoutTask(locateShim({ moduleUrl, env: envFor(cache) })),
      true,
      "cache",
    );
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});
