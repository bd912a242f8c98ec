import assert from "node:assert/strict";
import { MTC_E_DRIVER_TOO_OLD, MTC_E_NO_DRIVER } from "../../ffi/cuda_error.ts";
import { driverStatus } from "../../ffi/driver_status.ts";
import { deviceCount } from "../../mod.ts";

const root = new URL("../../", import.meta.url).pathname;
const minimum = Number(
  (await Deno.readTextFile(`${root}native/driver.h`)).match(
    /#define MTC_MIN_DRIVER_VERSION (\d+)/,
  )![1],
);

Deno.test("the status is the shim's answer in full: no name or text for 0, the minimum driver native/driver.h sets", () => {
  const status = driverStatus();
  assert.equal(status.minDriverVersion, minimum);
  assert.equal(status.status === 0, status.name === "" && status.text === "");
  if (status.status !== 0) assert.match(status.name, /^(MTC|CUDA)_ERROR_/);
  assert.ok(Number.isInteger(status.deviceCount) && status.deviceCount >= 0);
  if (status.status !== 0) assert.equal(status.deviceCount, 0);
});

Deno.test({
  name:
    "without libcuda.so.1: MTC_ERROR_NO_DRIVER, the loader's message, no version, no device (needs a machine without libcuda.so.1)",
  ignore: driverStatus().status !== MTC_E_NO_DRIVER,
  fn() {
    const status = driverStatus();
    assert.equal(status.name, "MTC_ERROR_NO_DRIVER");
    assert.match(status.text, /libcuda\.so\.1 cannot be loaded/);
    assert.match(status.detail, /libcuda\.so\.1/);
    assert.equal(status.driverVersion, 0);
    assert.equal(status.deviceCount, 0);
  },
});

Deno.test({
  name: "with a GPU: status 0, the devices mod.ts counts, a driver at least the minimum",
  ignore: deviceCount() === 0,
  fn() {
    const status = driverStatus();
    assert.equal(status.status, 0);
    assert.equal(status.deviceCount, deviceCount());
    assert.ok(status.driverVersion >= status.minDriverVersion, JSON.stringify(status));
  },
});

const stubDriver = (version: number) => `${root}native/build/stub-driver-${version}`;
const hasStubs = [10020, 12000].every((version) => {
  try {
    return Deno.statSync(`${stubDriver(version)}/libcuda.so.1`).isFile;
  } catch {
    return false;
  }
});

/** driverStatus() in a fresh process whose libcuda.so.1 is the stub driver of `version`. */
async function statusWithStub(version: number): Promise<Record<string, unknown>> {
  const url = new URL("../../ffi/driver_status.ts", import.meta.url).href;
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { driverStatus } from ${
        JSON.stringify(url)
      }; console.log(JSON.stringify(driverStatus()));`,
    ],
    env: {
      PATH: Deno.env.get("PATH") ?? "",
      HOME: Deno.env.get("HOME") ?? "/",
      LD_LIBRARY_PATH: stubDriver(version),
      // The product shim of this checkout, whichever build the suite loads.
      MTC_SHIM_PATH: `${root}native/prebuilt/${Deno.build.os}-${Deno.build.arch}/libmtc.so`,
    },
    clearEnv: true,
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return JSON.parse(stdout);
}

Deno.test({
  name:
    "a driver older than the minimum: its version and the minimum, read apart, and no device (needs the test-aid build, made with a C compiler)",
  ignore: !hasStubs,
  async fn() {
    const status = await statusWithStub(10020);
    assert.equal(status.status, MTC_E_DRIVER_TOO_OLD);
    assert.equal(status.name, "MTC_ERROR_DRIVER_TOO_OLD");
    assert.equal(status.driverVersion, 10020);
    assert.equal(status.minDriverVersion, minimum);
    assert.equal(status.deviceCount, 0);
  },
});

Deno.test({
  name:
    "a driver lacking an entry point: the entry point's name as the detail (needs the test-aid build, made with a C compiler)",
  ignore: !hasStubs,
  async fn() {
    const status = await statusWithStub(12000);
    assert.equal(status.name, "MTC_ERROR_MISSING_SYMBOL");
    assert.equal(status.detail, "cuInit");
    assert.equal(status.driverVersion, 12000);
    assert.equal(status.deviceCount, 0);
  },
});
