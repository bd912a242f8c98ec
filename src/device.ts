/**
 * Device strings: `"cpu"`, `"cuda"` (device 0) and `"cuda:N"`.
 *
 * @module
 */

import { deviceCount as nativeDeviceCount } from "../ffi/native.ts";

/** A parsed device: -1 is the CPU, N >= 0 is `cuda:N`. */
export type DeviceIndex = number;

/** The CPU's device index. */
export const CPU = -1;

const CUDA_PATTERN = /^cuda(?::(0|[1-9][0-9]{0,8}))?$/;

/**
 * Number of usable CUDA devices: 0 where there is no driver or no GPU.
 *
 * @returns the device count, cached after the first call
 * @throws {Error} only when the native shim itself is missing (the message
 * names the command that builds it)
 *
 * @example Skip GPU work on a machine without a GPU
 * ```ts
 * import { deviceCount } from "@mtc/core";
 * const target = deviceCount() > 0 ? "cuda:0" : "cpu";
 * console.assert(target === "cpu" || target === "cuda:0");
 * ```
 */
export function deviceCount(): number {
  return nativeDeviceCount();
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
  if (typeof device !== "string") {
    throw new TypeError(
      `Invalid device ${String(device)}: expected a string such as "cpu" or "cuda:0"`,
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
      `Cannot use device "${device}": no usable CUDA device (no GPU or no driver)`,
    );
  }
  if (index >= count) {
    throw new RangeError(
      `Invalid device "${device}": expected "cuda:0".."cuda:${count - 1}" (found ${count} device${
        count === 1 ? "" : "s"
      })`,
    );
  }
  return index;
}

/** The canonical string of a device index. */
export function deviceName(index: DeviceIndex): string {
  return index === CPU ? "cpu" : `cuda:${index}`;
}
