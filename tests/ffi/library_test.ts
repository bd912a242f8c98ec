import assert from "node:assert/strict";
import { ABI_VERSION } from "../../ffi/symbols.ts";
import { PREBUILT_SHIMS, SHIM_SOURCE_HASH } from "../../ffi/prebuilt.ts";
import { platformKey } from "../../ffi/shim_file.ts";

const modUrl = new URL("../../mod.ts", import.meta.url).href;
const root = new URL("../../", import.meta.url).pathname;

/** Runs `script` in a fresh Deno with `flags` and `env` (and nothing else inherited). */
async function runScript(
  script: string,
  { flags = [], env = {} }: { flags?: string[]; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  // `deno run` of a file, not `deno eval`, which grants every permission.
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(file, script);
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-check", ...flags, file],
    env: { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "/", ...env },
    clearEnv: true,
  }).output().finally(() => Deno.remove(file));
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
  assert.match(status.message, /MTC_SHIM_PATH="\/nonexistent\/libmtc.so" is not a readable file/);
  assert.equal(stderr.match(/@mtc\/core: /g)?.length, 1, stderr);
  assert.match(stdout, /cpu copy: cpu/);
});

Deno.test("a shim of another ABI version is refused with a message naming both versions", async () => {
  const wrong = `${root}native/build/libmtc_abi999.so`;
  const { stdout, stderr } = await runScript(reportStatus, {
    flags: ALL,
    env: { MTC_SHIM_PATH: wrong },
  });
  const status = parse(stdout);
  assert.equal(status.reason, "shim-unavailable", stderr);
  assert.match(status.message, new RegExp(`ABI version is 999, this package needs ${ABI_VERSION}`));
  assert.match(status.message, /native\/build\/libmtc_abi999.so/);
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
  assert.match(status.message, /needs --allow-ffi/);
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

Deno.test("a driver older than the shim needs: 0 devices, both versions named, one warning", async () => {
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
});

Deno.test("a driver that lacks an entry point is named, not loaded", async () => {
  const { stdout, stderr } = await runScript(reportStatus, {
    flags: ALL,
    env: { LD_LIBRARY_PATH: `${root}native/build/stub-driver-12000` },
  });
  const status = parse(stdout);
  assert.equal(status.reason, "driver-error", stderr);
  assert.match(status.message, /MTC_ERROR_MISSING_SYMBOL \(100005\).*\(cuInit\)/);
});
