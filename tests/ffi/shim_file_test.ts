import assert from "node:assert/strict";
import { PREBUILT_SHIMS } from "../../ffi/prebuilt.ts";
import { cachePath, platformKey, STALE_PRIVATE_COPY_MS } from "../../ffi/shim_cache.ts";
import { locateShim } from "../../ffi/shim_file.ts";
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
    // What is opened is a private copy of the verified bytes.
    assert.notEqual(first.openPath, first.path);
    assert.equal(await sha256Hex(await Deno.readFile(first.openPath)), shim.sha256);
    first.release();
    const second = await locateShim({ moduleUrl, env: envFor(cache) });
    assert.equal(second.origin, "cache");
    second.release();
    assert.equal(requests(), 1);
    // Once released, no private copy or temporary file is left beside it.
    const dir = first.path.slice(0, first.path.lastIndexOf("/"));
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), [first.path.split("/").pop()]);
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a private copy left by a process that died before loading it is swept by a later import", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  try {
    const first = await locateShim({ moduleUrl, env: envFor(cache) });
    first.release();
    const dir = first.path.slice(0, first.path.lastIndexOf("/"));
    // One left long ago (a killed process), one left just now (a process
    // that is loading it at this moment): only the old one goes.
    const stale = `${dir}/.load-killed`;
    const fresh = `${dir}/.load-loading`;
    for (const path of [stale, fresh]) {
      await Deno.mkdir(path, { mode: 0o700 });
      await Deno.writeFile(`${path}/libmtc.so`, shimBytes);
    }
    const past = new Date(Date.now() - STALE_PRIVATE_COPY_MS - 60_000);
    await Deno.utime(stale, past, past);
    (await locateShim({ moduleUrl, env: envFor(cache) })).release();
    const left = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(left, [".load-loading", first.path.split("/").pop()!].sort());
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("after the first download the shim is found with the server gone (offline)", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  (await locateShim({ moduleUrl, env: envFor(cache) })).release();
  await server.shutdown();
  try {
    const offline = await locateShim({ moduleUrl, env: envFor(cache) });
    offline.release();
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
      await Deno.writeFile(path, broken, { mode: 0o644 });
      const found = await locateShim({ moduleUrl, env: envFor(cache) });
      found.release();
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
    found.forEach((f) => f.release());
    assert.ok(found.every((f) => f.path === cachePath(cache, shim)));
    assert.equal(new Set(found.map((f) => f.openPath)).size, 8, "one private copy each");
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
  permissions: { net: false, read: true, write: true, env: true, ffi: true },
  async fn() {
    await assert.rejects(
      locateShim({ moduleUrl: "http://127.0.0.1:65001/ffi/", env: envFor(`${scratch}/net`) }),
      /needs permissions this process lacks: add --allow-net=127\.0\.0\.1:65001 /,
    );
  },
});

Deno.test({
  name: "without --allow-write the first download names the flag and the cache directory",
  permissions: { net: ["127.0.0.1"], read: true, write: false, env: true, ffi: true },
  async fn() {
    const cache = `${scratch}/write`;
    const { server, moduleUrl } = servePrebuilt();
    try {
      await assert.rejects(
        locateShim({ moduleUrl, env: envFor(cache) }),
        new RegExp(`add --allow-write=${cache}/mtc-core \\(write: cache the shim`),
      );
    } finally {
      await server.shutdown();
    }
  },
});

Deno.test("a Linux platform with no prebuilt shim is told to build one", async () => {
  await assert.rejects(
    locateShim({
      moduleUrl: "http://127.0.0.1:65001/ffi/",
      prebuilt: {},
      platform: "linux-riscv64",
      env: () => undefined,
    }),
    /no prebuilt native shim for linux-riscv64.*deno task build.*MTC_SHIM_PATH/,
  );
});

Deno.test("macOS and Windows get one line saying the CPU target is what runs there, and no advice to build", async () => {
  for (const other of ["darwin-aarch64", "windows-x86_64"]) {
    await assert.rejects(
      locateShim({
        moduleUrl: "http://127.0.0.1:65001/ffi/",
        platform: other,
        env: () => undefined,
      }),
      (error: Error) => {
        assert.equal(
          error.message,
          `@mtc/core uses CUDA GPUs on Linux (x86_64, aarch64) only; on ${other} it runs on the CPU target`,
        );
        return true;
      },
    );
  }
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
    const first = locateShim({ moduleUrl, env: envFor(cache) });
    assert.equal(await settlesWithoutTask(first), false);
    (await first).release();
    const second = locateShim({ moduleUrl, env: envFor(cache) });
    assert.equal(await settlesWithoutTask(second), true, "cache");
    (await second).release();
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

/**
 * A server on 127.0.0.1 that accepts connections and hands each to
 * `answer` (which may never answer); `close()` ends them all.
 */
function rawServer(answer: (conn: Deno.Conn) => Promise<void>) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const answers: Promise<void>[] = [];
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      answers.push(answer(conn).catch(() => {}));
    }
  })().catch(() => {});
  return {
    moduleUrl: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}/ffi/`,
    async close() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch { /* already closed by the client */ }
      }
      await accepting;
      await Promise.all(answers);
    },
  };
}

/** Reads the request's head, then waits until the client goes. */
async function holdOpen(conn: Deno.Conn, reply?: Uint8Array): Promise<void> {
  const buffer = new Uint8Array(4096);
  await conn.read(buffer);
  if (reply) await conn.write(reply);
  while ((await conn.read(buffer)) !== null) { /* wait */ }
}

function head(lines: string[]): Uint8Array {
  return new TextEncoder().encode(`HTTP/1.1 200 OK\r\n${lines.join("\r\n")}\r\n\r\n`);
}

/** Fails the test, instead of hanging it, when `promise` is still pending after `seconds`. */
async function within<T>(promise: Promise<T>, seconds: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still pending after ${seconds} s`)), seconds * 1000);
  });
  try {
    return await Promise.race([promise, guard]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("a server that never answers: the download gives up at its time limit, naming it", async () => {
  const cache = await Deno.makeTempDir();
  const server = rawServer((conn) => holdOpen(conn));
  try {
    await assert.rejects(
      within(
        locateShim({ moduleUrl: server.moduleUrl, env: envFor(cache), downloadTimeoutMs: 200 }),
        20,
      ),
      (error: Error) => {
        assert.match(error.message, /no complete answer within 200 ms/);
        assert.match(error.message, /MTC_DOWNLOAD_TIMEOUT_MS/);
        assert.match(error.message, /jsr:@mtc\/core\/install/);
        return true;
      },
    );
    await assert.rejects(Deno.stat(cachePath(cache, shim)), Deno.errors.NotFound);
  } finally {
    await server.close();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a body that never ends: the time limit covers the body too", async () => {
  const cache = await Deno.makeTempDir();
  const half = shimBytes.subarray(0, shimBytes.length >> 1);
  const reply = new Uint8Array([...head([`content-length: ${shim.bytes}`]), ...half]);
  const server = rawServer((conn) => holdOpen(conn, reply));
  try {
    await assert.rejects(
      within(
        locateShim({ moduleUrl: server.moduleUrl, env: envFor(cache), downloadTimeoutMs: 300 }),
        20,
      ),
      /no complete answer within 300 ms/,
    );
  } finally {
    await server.close();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a body longer than the shim is cut at the expected size, declared or not", async () => {
  const cache = await Deno.makeTempDir();
  const longer = new Uint8Array(shim.bytes + 4096);
  longer.set(shimBytes);
  // Without a length: bytes until the connection closes (which it never does).
  const endless = new Uint8Array([...head(["connection: close"]), ...longer]);
  const declared = new Uint8Array([...head([`content-length: ${longer.length}`]), ...longer]);
  for (const reply of [endless, declared]) {
    const server = rawServer((conn) => holdOpen(conn, reply));
    try {
      await assert.rejects(
        within(
          locateShim({
            moduleUrl: server.moduleUrl,
            env: envFor(cache),
            downloadTimeoutMs: 10_000,
          }),
          20,
        ),
        new RegExp(`more than the ${shim.bytes} (bytes )?expected`),
      );
    } finally {
      await server.close();
    }
  }
  await Deno.remove(cache, { recursive: true });
});

Deno.test("MTC_DOWNLOAD_TIMEOUT_MS sets the limit; a value that is not a number of milliseconds is named", async () => {
  const cache = await Deno.makeTempDir();
  const server = rawServer((conn) => holdOpen(conn));
  const env = (value: string) => (name: string) =>
    name === "MTC_DOWNLOAD_TIMEOUT_MS" ? value : envFor(cache)(name);
  try {
    await assert.rejects(
      within(locateShim({ moduleUrl: server.moduleUrl, env: env("250") }), 20),
      /no complete answer within 250 ms/,
    );
    await assert.rejects(
      locateShim({ moduleUrl: server.moduleUrl, env: env("soon") }),
      /Invalid MTC_DOWNLOAD_TIMEOUT_MS: expected a number of milliseconds >= 1, got "soon"/,
    );
  } finally {
    await server.close();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("a cache directory or file writable by its group or by everyone is refused, naming it", async () => {
  const { server, moduleUrl } = servePrebuilt();
  try {
    const path = cachePath("ROOT", shim);
    const parts = path.split("/");
    // mtc-core, <version>, abi<N>, <platform>, and the file itself.
    const levels = [2, 3, 4, 5, 6].map((n) => parts.slice(0, n).join("/"));
    for (const [index, level] of levels.entries()) {
      const cache = await Deno.makeTempDir();
      const target = level.replace("ROOT", cache);
      (await locateShim({ moduleUrl, env: envFor(cache) })).release();
      const mode = index % 2 === 0 ? 0o777 : 0o775;
      await Deno.chmod(target, index === 4 ? 0o666 : mode);
      await assert.rejects(locateShim({ moduleUrl, env: envFor(cache) }), (error: Error) => {
        assert.match(error.message, /^Cannot trust the @mtc\/core native shim cache: /);
        assert.ok(error.message.includes(`${target} is writable by`), error.message);
        assert.match(error.message, /chmod go-w/);
        return true;
      });
      await Deno.remove(cache, { recursive: true });
    }
  } finally {
    await server.shutdown();
  }
});

/** Whether this process may give a file away (only root may), for the ownership test. */
const canChown = await (async () => {
  const file = await Deno.makeTempFile();
  try {
    await Deno.chown(file, 4242, null);
    return true;
  } catch {
    return false;
  } finally {
    await Deno.remove(file);
  }
})();

Deno.test({
  name:
    "a cache directory that belongs to another user is refused (needs root: only root can give a file away)",
  ignore: !canChown,
  async fn() {
    const cache = await Deno.makeTempDir();
    const { server, moduleUrl } = servePrebuilt();
    try {
      (await locateShim({ moduleUrl, env: envFor(cache) })).release();
      await Deno.chown(`${cache}/mtc-core`, 4242, null);
      await assert.rejects(locateShim({ moduleUrl, env: envFor(cache) }), (error: Error) => {
        assert.ok(error.message.includes(`${cache}/mtc-core belongs to user 4242`), error.message);
        return true;
      });
    } finally {
      await server.shutdown();
      await Deno.remove(cache, { recursive: true });
    }
  },
});

Deno.test("the cache's directories are created private (mode 0700)", async () => {
  const cache = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  try {
    (await locateShim({ moduleUrl, env: envFor(cache) })).release();
    let dir = `${cache}/mtc-core`;
    for (const part of cachePath("", shim).split("/").slice(2, -1)) {
      assert.equal((await Deno.stat(dir)).mode! & 0o777, 0o700, dir);
      dir += `/${part}`;
    }
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("without HOME and XDG_CACHE_HOME the flags name $HOME for the shell to expand", async () => {
  await assert.rejects(
    locateShim({ moduleUrl: "http://127.0.0.1:65001/ffi/", env: () => undefined }),
    (error: Error) => {
      assert.ok(
        error.message.includes(
          `add --allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME --allow-read="$HOME/.cache/mtc-core" --allow-write="$HOME/.cache/mtc-core" `,
        ),
        error.message,
      );
      return true;
    },
  );
});

Deno.test({
  name: "every missing permission is named at once, as flags to paste (quoted where needed)",
  permissions: { read: false, write: false, net: false, ffi: false, env: false },
  async fn() {
    await assert.rejects(
      locateShim({ moduleUrl: "http://127.0.0.1:65001/ffi/", env: envFor("/home/a user/.cache") }),
      (error: Error) => {
        assert.ok(
          error.message.startsWith(
            `Loading the @mtc/core native shim needs permissions this process lacks: add --allow-read="/home/a user/.cache/mtc-core" --allow-write="/home/a user/.cache/mtc-core" --allow-net=127.0.0.1:65001 --allow-ffi (`,
          ),
          error.message,
        );
        return true;
      },
    );
  },
});

Deno.test("a time limit longer than a timer can hold (or Infinity) does not cut the download at once", async () => {
  // setTimeout fires at once for a delay past 2^31 - 1 ms: such a limit
  // aborted every download after 1 ms, however fast the server.
  const answered = Promise.withResolvers<void>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async () => {
    // Answer only once the request has been in flight a little while.
    await new Promise((resolve) => setTimeout(resolve, 50));
    answered.resolve();
    return new Response(shimBytes as Uint8Array<ArrayBuffer>);
  });
  const moduleUrl = `http://127.0.0.1:${server.addr.port}/ffi/`;
  try {
    for (const value of ["3000000000", "Infinity"]) {
      const cache = await Deno.makeTempDir();
      const env = (name: string) =>
        name === "MTC_DOWNLOAD_TIMEOUT_MS" ? value : envFor(cache)(name);
      const found = await within(locateShim({ moduleUrl, env }), 20);
      found.release();
      assert.equal(found.origin, "download", `MTC_DOWNLOAD_TIMEOUT_MS=${value}`);
      await Deno.remove(cache, { recursive: true });
    }
    await answered.promise;
  } finally {
    await server.shutdown();
  }
});

Deno.test("a relative XDG_CACHE_HOME is ignored, as the XDG spec asks: the cache is under HOME", async () => {
  const home = await Deno.makeTempDir();
  const { server, moduleUrl } = servePrebuilt();
  const env = (name: string) =>
    name === "XDG_CACHE_HOME" ? "relative-cache" : name === "HOME" ? home : undefined;
  try {
    const found = await locateShim({ moduleUrl, env });
    found.release();
    // Was "relative-cache/mtc-core/...", under the working directory.
    assert.equal(found.path, cachePath(`${home}/.cache`, shim));
  } finally {
    await server.shutdown();
    await Deno.remove(home, { recursive: true });
    await Deno.remove("relative-cache", { recursive: true }).catch(() => {});
  }
});

Deno.test("an answer with no body is refused by the integrity check, naming it", async () => {
  const cache = await Deno.makeTempDir();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(null, { status: 204 }),
  );
  try {
    await assert.rejects(
      () =>
        locateShim({
          moduleUrl: `http://127.0.0.1:${server.addr.port}/ffi/`,
          env: envFor(cache),
        }),
      // Was "Cannot read properties of null (reading 'getReader')".
      (error: Error) => /failed its integrity check \(0 bytes/.test(error.message),
    );
  } finally {
    await server.shutdown();
    await Deno.remove(cache, { recursive: true });
  }
});
