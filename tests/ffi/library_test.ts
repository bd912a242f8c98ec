import assert from "node:assert/strict";
import { ABI_VERSION } from "../../ffi/symbols.ts";
import { PREBUILT_SHIMS, SHIM_SOURCE_HASH } from "../../ffi/prebuilt.ts";
import { cachePath, platformKey } from "../../ffi/shim_cache.ts";
import { servePackage } from "./_package_server.ts";

const modUrl = new URL("../../mod.ts", import.meta.url).href;
const root = new URL("../../", import.meta.url).pathname;

/**
 * Runs `script` in a fresh Deno with `flags` and `env` (and nothing else
 * inherited); a child still running after 60 s is killed (exit code 137),
 * so that a hang fails the test instead of stopping the suite.
 */
async function runScript(
  script: string,
  { flags = [], env = {} }: { flags?: string[]; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  // `deno run` of a file, not `deno eval`, which grants every permission.
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(file, script);
  const guard = new AbortController();
  const timer = setTimeout(() => guard.abort(), 60_000);
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-check", ...flags, file],
    env: { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "/", ...env },
    clearEnv: true,
    signal: guard.signal,
  }).output().finally(() => {
    clearTimeout(timer);
    return Deno.remove(file);
  });
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: output.code, stdout: decode(output.stdout), stderr: decode(output.stderr) };
}

const reportStatus = `import { cudaStatus, deviceCount, startCopy } from ${JSON.stringify(modUrl)};
const status = cudaStatus();
console.log(JSON.stringify({ count: deviceCount(), reason: status.reason, message: status.message, shimPath: status.shimPath }));
const cpu = await startCopy([new Float32Array([1, 2])], "cpu").get();
console.log("cpu copy:", cpu[0].device);`;

const ALL = ["--allow-ffi", "--allow-read", "--allow-env"];

function parse(
  stdout: string,
): { count: number; reason: string; message: string; shimPath?: string } {
  return JSON.parse(stdout.split("\n")[0]);
}

Deno.test("a checkout loads its committed prebuilt shim, and the CPU target works without a GPU", async () => {
  const { code, stdout, stderr } = await runScript(reportStatus, { flags: ALL });
  assert.equal(code, 0, stderr);
  const status = parse(stdout);
  const expected = `${root}native/prebuilt/${platformKey()}/${
    PREBUILT_SHIMS[platformKey()].file.split("/")[1]
  }`;
  assert.equal(status.shimPath, expected);
  // Whatever this machine has, the answer is a count, never an exception.
  assert.ok(["ok", "no-device", "no-driver"].includes(status.reason), status.message);
  assert.equal(status.count > 0, status.reason === "ok");
  assert.match(stdout, /cpu copy: cpu/);
});

Deno.test("a missing MTC_SHIM_PATH gives 0 devices, one warning naming the path, and a working CPU target", async () => {
  const { code, stdout, stderr } = await runScript(reportStatus, {
    flags: ALL,
    env: { MTC_SHIM_PATH: "/nonexistent/libmtc.so" },
  });
  assert.equal(code, 0, stderr);
  const status = parse(stdout);
  assert.equal(status.count, 0);
  assert.equal(status.reason, "shim-unavailable");
  assert.match(
    status.message,
    /Invalid MTC_SHIM_PATH: expected a readable file, got "\/nonexistent\/libmtc.so"/,
  );
  assert.equal(stderr.match(/@mtc\/core: /g)?.length, 1, stderr);
  assert.match(stdout, /cpu copy: cpu/);
});

const testBuild = `${root}native/build`;
const hasTestBuild = [
  "libmtc_abi999.so",
  "stub-driver-10020/libcuda.so.1",
  "stub-driver-12000/libcuda.so.1",
].every((file) => {
  try {
    return Deno.statSync(`${testBuild}/${file}`).isFile;
  } catch {
    return false;
  }
});

Deno.test({
  name:
    "a shim of another ABI version is refused with a message naming both versions (needs the test-aid build, made with a C compiler)",
  ignore: !hasTestBuild,
  async fn() {
    const wrong = `${root}native/build/libmtc_abi999.so`;
    const { stdout, stderr } = await runScript(reportStatus, {
      flags: ALL,
      env: { MTC_SHIM_PATH: wrong },
    });
    const status = parse(stdout);
    assert.equal(status.reason, "shim-unavailable", stderr);
    assert.match(
      status.message,
      new RegExp(`ABI version is 999, this package needs ${ABI_VERSION}`),
    );
    assert.match(status.message, /native\/build\/libmtc_abi999.so/);
  },
});

Deno.test("a CUDA target without a usable device is an Error that says why", async () => {
  const script = `import { startCopy } from ${JSON.stringify(modUrl)};
try { startCopy([new Float32Array(1)], "cuda:0"); } catch (e) { console.log(e.name + ": " + e.message); }`;
  const { stdout } = await runScript(script, {
    flags: ALL,
    env: { MTC_SHIM_PATH: "/nonexistent/libmtc.so" },
  });
  assert.match(
    stdout,
    /^Error: Cannot use device "cuda:0": no usable CUDA device \(.*MTC_SHIM_PATH/,
  );
});

Deno.test("without --allow-ffi the status names the flag, and importing still works", async () => {
  const { code, stdout, stderr } = await runScript(reportStatus, {
    flags: ["--allow-read", "--allow-env"],
  });
  assert.equal(code, 0, stderr);
  const status = parse(stdout);
  assert.equal(status.reason, "shim-unavailable");
  assert.match(status.message, /needs permissions this process lacks: add --allow-ffi \(/);
});

Deno.test("the committed prebuilt shim reports the source hash that ffi/prebuilt.ts names", async () => {
  const path = `${root}native/prebuilt/${PREBUILT_SHIMS[platformKey()].file}`;
  const bytes = await Deno.readFile(path);
  const text = new TextDecoder("latin1").decode(bytes);
  assert.match(text, new RegExp(`MTC_SOURCE_HASH=${SHIM_SOURCE_HASH}`));
});

Deno.test("the package version in ffi/shim_file.ts (it keys the cache) is deno.json's", async () => {
  const { PACKAGE_VERSION } = await import("../../ffi/shim_file.ts");
  const config = JSON.parse(await Deno.readTextFile(`${root}deno.json`));
  assert.equal(PACKAGE_VERSION, config.version);
});

Deno.test({
  name:
    "a driver older than the shim needs: 0 devices, both versions named, one warning (needs the test-aid build, made with a C compiler)",
  ignore: !hasTestBuild,
  async fn() {
    const { code, stdout, stderr } = await runScript(reportStatus, {
      flags: ALL,
      env: { LD_LIBRARY_PATH: `${root}native/build/stub-driver-10020` },
    });
    assert.equal(code, 0, stderr);
    const status = parse(stdout);
    assert.equal(status.count, 0);
    assert.equal(status.reason, "driver-too-old");
    assert.match(
      status.message,
      /supports CUDA 10\.2, older than the CUDA 11\.2 that @mtc\/core needs/,
    );
    assert.equal(stderr.match(/@mtc\/core: /g)?.length, 1, stderr);
    assert.match(stdout, /cpu copy: cpu/);
  },
});

Deno.test({
  name:
    "a driver that lacks an entry point is named, not loaded (needs the test-aid build, made with a C compiler)",
  ignore: !hasTestBuild,
  async fn() {
    const { stdout, stderr } = await runScript(reportStatus, {
      flags: ALL,
      env: { LD_LIBRARY_PATH: `${root}native/build/stub-driver-12000` },
    });
    const status = parse(stdout);
    assert.equal(status.reason, "driver-error", stderr);
    assert.match(status.message, /MTC_ERROR_MISSING_SYMBOL \(100005\).*\(cuInit\)/);
  },
});

/** Whether `command` runs here. */
async function available(command: string, args: string[]): Promise<boolean> {
  try {
    return (await new Deno.Command(command, { args, stdout: "null", stderr: "null" }).output())
      .success;
  } catch {
    return false;
  }
}

const hasScript = await available("script", ["--version"]);
const hasCc = await available("cc", ["--version"]);

Deno.test({
  name:
    "importing never prompts, even on a terminal (a script(1) pseudo-terminal): what is missing is reported (needs script(1), from util-linux)",
  ignore: !hasScript,
  async fn() {
    const file = await Deno.makeTempFile({ suffix: ".ts" });
    await Deno.writeTextFile(file, reportStatus);
    // On a terminal an ungranted Deno.dlopen (or read, write, net, env)
    // asks "Allow?" and waits for an answer: the import would hang.
    const child = new Deno.Command("script", {
      args: ["-qec", `'${Deno.execPath()}' run --no-check ${file}`, "/dev/null"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      env: { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "/" },
      clearEnv: true,
    }).spawn();
    let text = "";
    const decoder = new TextDecoder();
    for await (const chunk of child.stdout) {
      text += decoder.decode(chunk, { stream: true });
      // A prompt waits for ever: stop it (the test fails below).
      if (text.includes("Allow?")) child.kill("SIGTERM");
    }
    await child.stderr.cancel();
    await child.status;
    await Deno.remove(file);
    assert.doesNotMatch(text, /Deno requests/, text);
    assert.match(text, /"reason":"shim-unavailable"/, text);
    assert.match(text, /add --allow-ffi \(/, text);
    assert.match(text, /cpu copy: cpu/, text);
  },
});

Deno.test("a path-scoped --allow-ffi gets a message saying why it is not enough, not Deno's", async () => {
  const { code, stdout, stderr } = await runScript(reportStatus, {
    flags: [`--allow-ffi=${root}native`, "--allow-read", "--allow-env"],
  });
  assert.equal(code, 0, stderr);
  const status = parse(stdout);
  assert.equal(status.reason, "shim-unavailable");
  assert.match(status.message, /add --allow-ffi \(ffi without a path \(a path-scoped/);
  assert.doesNotMatch(stderr, /Requires ffi access/);
});

/** A script that imports the package from `server` and reports, as `reportStatus` does. */
function remoteReport(url: string): string {
  return reportStatus.replace(JSON.stringify(modUrl), JSON.stringify(`${url}mod.ts`));
}

Deno.test("a remote import with no permissions names every missing flag in one message, and those flags, pasted, work", async () => {
  const server = servePackage();
  const home = await Deno.makeTempDir();
  const denoDir = await Deno.makeTempDir();
  try {
    const env = { HOME: home, DENO_DIR: denoDir };
    const first = await runScript(remoteReport(server.url), {
      flags: [`--allow-import=${server.host}`],
      env,
    });
    assert.equal(first.code, 0, first.stderr);
    const status = parse(first.stdout);
    assert.equal(status.reason, "shim-unavailable");
    const flags =
      `--allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME --allow-read="$HOME/.cache/mtc-core" --allow-write="$HOME/.cache/mtc-core" --allow-net=${server.host} --allow-ffi`;
    assert.ok(status.message.includes(`add ${flags} (`), status.message);
    // One warning line, with all of them.
    assert.equal(first.stderr.match(/@mtc\/core: /g)?.length, 1, first.stderr);
    // Pasted into a shell as printed, they are all that is needed.
    const file = `${home}/main.ts`;
    await Deno.writeTextFile(file, remoteReport(server.url));
    const pasted = await new Deno.Command("bash", {
      args: [
        "-c",
        `'${Deno.execPath()}' run --no-check --allow-import=${server.host} ${flags} ${file}`,
      ],
      env: { PATH: Deno.env.get("PATH") ?? "", ...env },
      clearEnv: true,
    }).output();
    const second = new TextDecoder().decode(pasted.stdout);
    assert.equal(pasted.code, 0, new TextDecoder().decode(pasted.stderr));
    assert.notEqual(parse(second).reason, "shim-unavailable", second);
    assert.equal(
      parse(second).shimPath,
      cachePath(`${home}/.cache`, PREBUILT_SHIMS[platformKey()]),
    );
  } finally {
    await server.close();
    await Deno.remove(home, { recursive: true });
    await Deno.remove(denoDir, { recursive: true });
  }
});

const REMOTE_FLAGS = (host: string, cache: string) => [
  `--allow-import=${host}`,
  `--allow-net=${host}`,
  "--allow-ffi",
  `--allow-read=${cache}`,
  `--allow-write=${cache}`,
  "--allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME,MTC_DOWNLOAD_TIMEOUT_MS",
];

Deno.test("a download that never completes: the import succeeds after the time limit, the status says why, the CPU target works", async () => {
  const server = servePackage("never");
  const cache = await Deno.makeTempDir();
  const denoDir = await Deno.makeTempDir();
  try {
    const { code, stdout, stderr } = await runScript(remoteReport(server.url), {
      flags: REMOTE_FLAGS(server.host, cache),
      env: { XDG_CACHE_HOME: cache, DENO_DIR: denoDir, MTC_DOWNLOAD_TIMEOUT_MS: "300" },
    });
    assert.equal(code, 0, stderr);
    const status = parse(stdout);
    assert.equal(status.count, 0);
    assert.equal(status.reason, "shim-unavailable");
    assert.match(status.message, /no complete answer within 300 ms/);
    assert.match(stdout, /cpu copy: cpu/);
    assert.equal(server.shimRequests(), 1);
  } finally {
    await server.close();
    await Deno.remove(cache, { recursive: true });
    await Deno.remove(denoDir, { recursive: true });
  }
});

Deno.test({
  name:
    "a process swapping the cached shim with a planted library while imports run: the planted library never loads (needs a C compiler, cc)",
  ignore: !hasCc,
  async fn() {
    const server = servePackage();
    const work = await Deno.makeTempDir();
    const cache = `${work}/cache`;
    const denoDir = `${work}/deno`;
    const planted = `${work}/planted.so`;
    const marker = `${work}/marker`;
    const built = await new Deno.Command("cc", {
      args: ["-shared", "-fPIC", "-o", planted, `${root}native/test_planted_library.c`],
    }).output();
    assert.ok(built.success, new TextDecoder().decode(built.stderr));
    const env = { XDG_CACHE_HOME: cache, DENO_DIR: denoDir, MTC_PLANTED_MARKER: marker };
    const flags = REMOTE_FLAGS(server.host, cache);
    const script = remoteReport(server.url);
    // The first import downloads the shim (and the modules).
    const first = await runScript(script, { flags, env });
    assert.equal(first.code, 0, first.stderr);
    const target = cachePath(cache, PREBUILT_SHIMS[platformKey()]);
    const genuine = `${work}/genuine.so`;
    await Deno.copyFile(target, genuine);
    const swapper = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        `--allow-read=${work}`,
        `--allow-write=${work}`,
        `${root}tests/ffi/_swap_loop.ts`,
        target,
        planted,
        genuine,
      ],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const reader = swapper.stdout.getReader();
    await reader.read(); // "swapping"
    reader.releaseLock();
    const reasons: string[] = [];
    try {
      for (let round = 0; round < 5; round++) {
        const runs = await Promise.all(
          Array.from({ length: 6 }, () => runScript(script, { flags, env })),
        );
        for (const run of runs) reasons.push(parse(run.stdout).reason);
      }
    } finally {
      swapper.kill("SIGKILL");
      await swapper.status;
      await swapper.stdout.cancel();
      await server.close();
    }
    let ran = "";
    try {
      ran = await Deno.readTextFile(marker);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    await Deno.remove(work, { recursive: true });
    assert.equal(
      ran,
      "",
      `the planted library's constructor ran ${ran.split("\n").length - 1} times in 30 imports`,
    );
    // Each import loaded the genuine shim (a fresh copy where it read the planted one).
    assert.ok(reasons.every((reason) => reason !== "shim-unavailable"), reasons.join(", "));
  },
});

Deno.test("MTC_SHIM_PATH naming a file in the working directory without a slash loads that file", async () => {
  // dlopen() searches the system's library path for a bare name: the file
  // checked in the working directory was not the one opened.
  const dir = await Deno.makeTempDir();
  const file = `shim-in-cwd-${crypto.randomUUID()}.so`;
  await Deno.copyFile(
    `${root}native/prebuilt/${PREBUILT_SHIMS[platformKey()].file}`,
    `${dir}/${file}`,
  );
  const script = `${dir}/status.ts`;
  await Deno.writeTextFile(script, reportStatus);
  try {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-check", ...ALL, script],
      cwd: dir,
      env: {
        PATH: Deno.env.get("PATH") ?? "",
        HOME: Deno.env.get("HOME") ?? "/",
        MTC_SHIM_PATH: file,
      },
      clearEnv: true,
    }).output();
    const stdout = new TextDecoder().decode(output.stdout);
    assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
    const status = parse(stdout);
    assert.notEqual(status.reason, "shim-unavailable", status.message);
    assert.equal(status.shimPath, file);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
