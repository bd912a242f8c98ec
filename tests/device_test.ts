import assert from "node:assert/strict";
import { cudaStatus, deviceCount } from "../mod.ts";
import { CPU, deviceName, parseDevice } from "../src/device.ts";

Deno.test("deviceCount() is a non-negative integer and never throws for a missing GPU", () => {
  const count = deviceCount();
  assert.ok(Number.isInteger(count) && count >= 0);
});

// First in the file: before any CUDA device string was parsed, the
// last-device fast path once matched a missing device and returned cuda:0.
Deno.test("parseDevice() throws TypeError for a missing device, before any device was parsed", () => {
  assert.throws(() => parseDevice(undefined), {
    name: "TypeError",
    message: /Invalid device undefined: .*the device argument is required/,
  });
});

Deno.test("parseDevice() reads cpu, cuda and cuda:N", () => {
  assert.equal(parseDevice("cpu"), CPU);
  if (deviceCount() > 0) {
    assert.equal(parseDevice("cuda"), 0);
    assert.equal(parseDevice("cuda:0"), 0);
  }
  assert.equal(deviceName(CPU), "cpu");
  assert.equal(deviceName(3), "cuda:3");
});

Deno.test("parseDevice() throws TypeError naming a malformed device", () => {
  for (const bad of ["gpu", "", "cuda:", "cuda:-1", "cuda:1.5", "cuda:01", "CUDA:0", " cpu"]) {
    assert.throws(() => parseDevice(bad), { name: "TypeError", message: new RegExp(`"${bad}"`) });
  }
  assert.throws(() => parseDevice(7), TypeError);
  assert.throws(() => parseDevice(null), TypeError);
  if (deviceCount() > 0) parseDevice("cuda:0");
  assert.throws(() => parseDevice(undefined), TypeError);
});

Deno.test("parseDevice() throws RangeError past the device count", () => {
  const count = deviceCount();
  if (count === 0) {
    assert.throws(() => parseDevice("cuda:0"), { name: "Error", message: /no usable CUDA device/ });
  } else {
    assert.throws(() => parseDevice(`cuda:${count}`), {
      name: "RangeError",
      message: new RegExp(`found ${count} device`),
    });
  }
});

Deno.test("cudaStatus() is frozen: changing it cannot change deviceCount() or the device checks", () => {
  const status = cudaStatus();
  const count = deviceCount();
  assert.ok(Object.isFrozen(status));
  assert.throws(() => {
    (status as { deviceCount: number }).deviceCount = count + 2;
  }, TypeError);
  assert.equal(deviceCount(), count);
  assert.throws(() => parseDevice(`cuda:${count + 1}`));
});
