import assert from "node:assert/strict";
import { PREBUILT_SHIMS } from "../../ffi/prebuilt.ts";
import {
  cacheFor,
  cachePath,
  cachePermissions,
  PACKAGE_VERSION,
  platformKey,
  readCached,
  trustedPrivateDir,
  writeAtomically,
} from "../../ffi/shim_cache.ts";
import { ABI_VERSION } from "../../ffi/symbols.ts";

// Through locateShim (downloads, replacement of a corrupt cached file,
// modes, ownership, sweeping, concurrency): tests/ffi/shim_file_test.ts.
// Here, the cache's own decisions, one function at a time.

const shim = { file: "linux-x86_64/libmtc.so", bytes: 4, sha256: "" };
const bytes = new Uint8Array([1, 2, 3, 4]);
shim.sha256 = Array.from(
  new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)),
  (b) => b.toString(16).padStart(2, "0"),
).join("");

const env = (values: Record<string, string>) => (name: string) => values[name];

Deno.test("the cache path names the version, the ABI, the platform and the hash's first 16 digits", () => {
  assert.equal(
    cachePath("/c", shim, "linux-x86_64"),
    `/c/mtc-core/${PACKAGE_VERSION}/abi${ABI_VERSION}/linux-x86_64/libmtc-${
      shim.sha256.slice(0, 16)
    }.so`,
  );
  assert.equal(platformKey(), `${Deno.build.os}-${Deno.build.arch}`);
  assert.ok(PREBUILT_SHIMS[platformKey()] !== undefined || Deno.build.os !== "linux");
});

Deno.test("the cache root is XDG_CACHE_HOME, else HOME/.cache; relative values are ignored; none is unknown", () => {
  const at = (values: Record<string, string>) => cacheFor(env(values), shim, "linux-x86_64");
  assert.equal(at({ XDG_CACHE_HOME: "/x", HOME: "/h" }).dir, "/x/mtc-core");
  assert.equal(at({ HOME: "/h" }).dir, "/h/.cache/mtc-core");
  assert.equal(at({ XDG_CACHE_HOME: "x", HOME: "/h" }).dir, "/h/.cache/mtc-core");
  const none = at({ XDG_CACHE_HOME: "x", HOME: "h" });
  assert.equal(none.known, false);
  // Named for the shell to expand, in the flags a message suggests.
  assert.equal(none.dir, "$HOME/.cache/mtc-core");
  const known = at({ XDG_CACHE_HOME: "/x" });
  assert.equal(known.known, true);
  assert.deepEqual(known.chain, [
    "/x/mtc-core",
    `/x/mtc-core/${PACKAGE_VERSION}`,
    `/x/mtc-core/${PACKAGE_VERSION}/abi${ABI_VERSION}`,
    `/x/mtc-core/${PACKAGE_VERSION}/abi${ABI_VERSION}/linux-x86_64`,
  ]);
  assert.equal(known.file, cachePath("/x", shim, "linux-x86_64"));
});

Deno.test("a cached shim is read only when its size and SHA-256 match; a missing one is undefined", async () => {
  const root = await Deno.makeTempDir();
  const cache = cacheFor(env({ XDG_CACHE_HOME: root }), shim, "test");
  try {
    assert.equal(readCached(cache, shim), undefined, "not cached yet");
    await Deno.mkdir(cache.chain.at(-1)!, { recursive: true });
    await Deno.writeFile(cache.file, bytes);
    assert.deepEqual(readCached(cache, shim), bytes);
    await Deno.writeFile(cache.file, new Uint8Array([1, 2, 3, 5]));
    assert.equal(readCached(cache, shim), undefined, "same size, other bytes");
    await Deno.writeFile(cache.file, new Uint8Array([1, 2, 3, 4, 5]));
    assert.equal(readCached(cache, shim), undefined, "longer");
    const unknown = cacheFor(env({}), shim, "test");
    assert.equal(readCached(unknown, shim), undefined, "no root");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a cached path that cannot be read as a file is an error naming it and the way out", async () => {
  const root = await Deno.makeTempDir();
  const cache = cacheFor(env({ XDG_CACHE_HOME: root }), shim, "test");
  try {
    await Deno.mkdir(cache.file, { recursive: true }); // a directory where the file goes
    assert.throws(() => readCached(cache, shim), (error: Error) => {
      assert.ok(
        error.message.startsWith(`Cannot use the @mtc/core native shim cache at ${cache.file} (`),
      );
      assert.match(error.message, /set XDG_CACHE_HOME to one, or set MTC_SHIM_PATH$/);
      assert.ok(error.cause instanceof Error);
      return true;
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("writing the cache replaces the file whole, by rename, and leaves no temporary file", async () => {
  const root = await Deno.makeTempDir();
  const cache = cacheFor(env({ XDG_CACHE_HOME: root }), shim, "test");
  try {
    const dir = trustedPrivateDir(cache);
    await Deno.remove(dir, { recursive: true });
    await Deno.writeFile(cache.file, new Uint8Array([9, 9]));
    const before = (await Deno.stat(cache.file)).ino;
    await writeAtomically(cache, bytes);
    assert.deepEqual(await Deno.readFile(cache.file), bytes);
    assert.notEqual(
      (await Deno.stat(cache.file)).ino,
      before,
      "a new file, not rewritten in place",
    );
    const names = [...Deno.readDirSync(cache.chain.at(-1)!)].map((entry) => entry.name);
    assert.deepEqual(names, [cache.file.split("/").pop()]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a failed write names the cache and removes its temporary file", async () => {
  const root = await Deno.makeTempDir();
  const cache = cacheFor(env({ XDG_CACHE_HOME: root }), shim, "test");
  try {
    const dir = cache.chain.at(-1)!;
    await Deno.mkdir(cache.file, { recursive: true }); // rename onto a directory fails
    await Deno.writeFile(`${cache.file}/keep`, bytes);
    await assert.rejects(
      writeAtomically(cache, bytes),
      /Cannot use the @mtc\/core native shim cache at /,
    );
    const names = [...Deno.readDirSync(dir)].map((entry) => entry.name);
    assert.deepEqual(names, [cache.file.split("/").pop()]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a private directory is made fresh in the platform's directory, one per call", async () => {
  const root = await Deno.makeTempDir();
  const cache = cacheFor(env({ XDG_CACHE_HOME: root }), shim, "test");
  try {
    const first = trustedPrivateDir(cache);
    const second = trustedPrivateDir(cache);
    assert.notEqual(first, second);
    for (const dir of [first, second]) {
      assert.ok(dir.startsWith(`${cache.chain.at(-1)}/.load-`), dir);
      assert.equal((await Deno.stat(dir)).mode! & 0o777, 0o700);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("with every permission granted nothing is missing; a cache not known names env, read and write", () => {
  const known = cacheFor(env({ XDG_CACHE_HOME: "/x" }), shim, "test");
  const url = new URL("http://127.0.0.1:1/libmtc.so");
  // This suite runs with --allow-read, --allow-write, --allow-net=127.0.0.1.
  assert.deepEqual(cachePermissions(known, url, undefined), []);
  const unknown = cacheFor(env({}), shim, "test");
  assert.deepEqual(
    cachePermissions(unknown, url, bytes).map((missing) => missing?.flag),
    [
      "--allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME",
      '--allow-read="$HOME/.cache/mtc-core"',
      '--allow-write="$HOME/.cache/mtc-core"',
    ],
  );
});
