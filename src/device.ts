/**
 * Device strings: `"cpu"`, `"cuda"` (device 0) and `"cuda:N"`.
 *
 * @module
 */

import { shimInfo } from "../ffi/library.ts";
import { driverStatus } from "../ffi/driver_status.ts";
import { MTC_E_DRIVER_TOO_OLD, MTC_E_NO_DRIVER } from "../ffi/cuda_error.ts";
import { shown } from "./shown.ts";

/** A parsed device: -1 is the CPU, N >= 0 is `cuda:N`. */
export type DeviceIndex = number;

/** The CPU's device index. */
export const CPU = -1;

const CUDA_PATTERN = /^cuda(?::(0|[1-9][0-9]{0,8}))?$/;

/** Why CUDA devices can or cannot be used; see {@linkcode cudaStatus}. */
export type CudaStatusReason =
  | "ok"
  | "no-device"
  | "no-driver"
  | "driver-too-old"
  | "driver-error"
  | "shim-unavailable";

/** What {@linkcode cudaStatus} reports. */
export interface CudaStatus {
  /** Usable CUDA devices (what {@linkcode deviceCount} returns). */
  readonly deviceCount: number;
  /**
   * `"ok"` (one or more devices), `"no-device"` (a driver and no GPU),
   * `"no-driver"` (libcuda.so.1 cannot be loaded), `"driver-too-old"`,
   * `"driver-error"` (the driver failed to initialise; see `error`), or
   * `"shim-unavailable"` (the native shim could not be found or loaded,
   * e.g. a missing permission; see `error`).
   */
  readonly reason: CudaStatusReason;
  /** One sentence for people: what was found and, where it helps, what to do. */
  readonly message: string;
  /** The driver's CUDA version, e.g. `"12.4"`, where known. */
  readonly driverVersion?: string;
  /** The oldest driver the shim accepts, as a CUDA version (`"11.2"`). */
  readonly requiredDriverVersion: string;
  /** The path of the loaded native shim, where one is loaded. */
  readonly shimPath?: string;
  /** The underlying failure, for `"driver-error"` and `"shim-unavailable"`. */
  readonly error?: Error;
}

/** The oldest driver the shim accepts (native/driver.h), for messages before it loads. */
const MIN_DRIVER_VERSION = 11020;

function cudaVersion(version: number): string {
  return `${Math.floor(version / 1000)}.${Math.floor((version % 1000) / 10)}`;
}

let status: CudaStatus | undefined;

function readStatus(): CudaStatus {
  const shim = shimInfo();
  if (shim.error || !shim.file) {
    return {
      deviceCount: 0,
      reason: "shim-unavailable",
      message: `No CUDA device can be used: ${
        shim.error?.message ?? "the native shim is not loaded"
      }`,
      requiredDriverVersion: cudaVersion(MIN_DRIVER_VERSION),
      error: shim.error,
    };
  }
  const found = driverStatus();
  const common = {
    driverVersion: found.driverVersion > 0 ? cudaVersion(found.driverVersion) : undefined,
    requiredDriverVersion: cudaVersion(found.minDriverVersion),
    shimPath: shim.file.path,
  };
  if (found.status === 0) {
    return found.deviceCount > 0
      ? {
        ...common,
        deviceCount: found.deviceCount,
        reason: "ok",
        message: `${found.deviceCount} CUDA device${
          found.deviceCount === 1 ? "" : "s"
        } (driver for CUDA ${common.driverVersion})`,
      }
      : {
        ...common,
        deviceCount: 0,
        reason: "no-device",
        message: `The NVIDIA driver (CUDA ${common.driverVersion}) reports no CUDA device`,
      };
  }
  if (found.status === MTC_E_NO_DRIVER) {
    return {
      ...common,
      deviceCount: 0,
      reason: "no-driver",
      message: `No NVIDIA driver: libcuda.so.1 cannot be loaded (${found.detail})`,
    };
  }
  if (found.status === MTC_E_DRIVER_TOO_OLD) {
    return {
      ...common,
      deviceCount: 0,
      reason: "driver-too-old",
      message: `The NVIDIA driver supports CUDA ${
        common.driverVersion ?? "(unknown)"
      }, older than the CUDA ${common.requiredDriverVersion} that @mtc/core needs: update the driver to use the GPU`,
    };
  }
  const error = new Error(
    `${found.name} (${found.status}): ${found.text}${found.detail ? ` (${found.detail})` : ""}`,
  );
  return {
    ...common,
    deviceCount: 0,
    reason: "driver-error",
    message: `The NVIDIA driver failed to initialise: ${error.message}`,
    error,
  };
}

/**
 * Why CUDA devices can or cannot be used here: the device count, the
 * driver's version against the one required, or what failed. Computed once
 * (the first call loads the driver); never throws. Where a GPU may be
 * present but cannot be used (a driver too old, a failing driver, a shim
 * that cannot be loaded), the first call also prints the message to stderr,
 * once, so that a silent fallback to the CPU does not go unnoticed.
 *
 * @returns the status, the same frozen object on every call
 *
 * @example Say why a script runs on the CPU
 * ```ts
 * import { cudaStatus, deviceCount } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const status = cudaStatus();
 * if (status.deviceCount === 0) console.log(`running on the CPU: ${status.message}`);
 * assert.equal(status.deviceCount, deviceCount());
 * assert.equal(status.reason === "ok", status.deviceCount > 0);
 * ```
 */
export function cudaStatus(): CudaStatus {
  if (status) return status;
  // Frozen: it is shared, and deviceCount() and every device check read it
  // (a status.deviceCount = 2 made "cuda:1" pass the checks).
  status = Object.freeze(readStatus());
  if (
    status.reason === "driver-too-old" || status.reason === "driver-error" ||
    status.reason === "shim-unavailable"
  ) {
    console.warn(`@mtc/core: ${status.message}`);
  }
  return status;
}

/**
 * Number of usable CUDA devices: 0 where there is no driver, no GPU, or
 * CUDA cannot be used for another reason ({@linkcode cudaStatus} says which).
 *
 * @returns the device count, computed once
 *
 * @example Skip GPU work on a machine without a GPU
 * ```ts
 * import { deviceCount } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const count = deviceCount();
 * const target = count > 0 ? "cuda:0" : "cpu";
 * assert.ok(Number.isInteger(count) && count >= 0);
 * assert.equal(target === "cpu", count === 0);
 * ```
 */
export function deviceCount(): number {
  return cudaStatus().deviceCount;
}

/**
 * Parses a device string, checking it against the devices that exist.
 *
 * @throws {TypeError} for a malformed string
 * @throws {RangeError} for `cuda:N` with N >= the device count
 * @throws {Error} for a CUDA device where no CUDA device is usable
 */
export function parseDevice(device: unknown): DeviceIndex {
  if (device === "cpu") return CPU;
  // A training loop names the same device every step: skip the pattern.
  if (device === lastParsed) return lastIndex;
  if (typeof device !== "string") {
    const required = device === undefined ? " (the device argument is required)" : "";
    throw new TypeError(
      `Invalid device ${shown(device)}: expected a string such as "cpu" or "cuda:0"${required}`,
    );
  }
  const match = CUDA_PATTERN.exec(device);
  if (!match) {
    throw new TypeError(
      `Invalid device "${device}": expected "cpu", "cuda" or "cuda:N"`,
    );
  }
  const index = match[1] === undefined ? 0 : Number(match[1]);
  const count = deviceCount();
  if (count === 0) {
    throw new Error(
      `Cannot use device "${device}": no usable CUDA device (${cudaStatus().message})`,
    );
  }
  if (index >= count) {
    throw new RangeError(
      `Invalid device "${device}": expected "cuda:0".."cuda:${count - 1}" (found ${count} device${
        count === 1 ? "" : "s"
      })`,
    );
  }
  lastParsed = device;
  lastIndex = index;
  return index;
}

// The last CUDA device string parsed and its index (the device count is
// fixed for the process, so a valid string stays valid). It starts as
// "cpu", which returns before the comparison: a value that no argument can
// match there (an `undefined` start matched a missing device, which then
// went to cuda:0).
let lastParsed = "cpu";
let lastIndex: DeviceIndex = 0;

/** The canonical string of a device index. */
export function deviceName(index: DeviceIndex): string {
  return index === CPU ? "cpu" : `cuda:${index}`;
}
