/**
 * What every file of the GPU API reads its arguments with: `describe`, a
 * value as their errors name it ("got Map", "got \"cpu\""), and
 * `parseCudaDevice`, a device string that must name a GPU. Their own file
 * because streams, kernels, modules and `after` all check arguments, and
 * the lowest of them (the stream) must not be where the others fetch a
 * message from.
 *
 * @module
 */

import { CPU, type DeviceIndex, parseDevice } from "../device.ts";
import { shown } from "../shown.ts";

/**
 * Parses a CUDA device string (`"cuda"`, `"cuda:N"`); `what` names the
 * argument in errors.
 *
 * @throws {TypeError} for `"cpu"` or what is no device string
 * @throws {RangeError} for a device past the device count
 */
export function parseCudaDevice(device: unknown, what = "device"): DeviceIndex {
  const index = parseDevice(device);
  if (index === CPU) {
    throw new TypeError(`Invalid ${what} "cpu": expected "cuda" or "cuda:N"`);
  }
  return index;
}

/**
 * A short description of a value for error messages: `null`, strings
 * quoted, objects by their class's name (bare, unlike `shown`, since the
 * messages read "got Map"), other primitives as `String` writes them.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { describe } from "./arguments.ts";
 * assert.equal(describe("cpu"), '"cpu"');
 * assert.equal(describe(new Map()), "Map");
 * assert.equal(describe(Object.create(null)), "an object");
 * ```
 */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "string") return `"${value}"`;
  // shown() never throws (a constructor getter that throws, a Symbol, a
  // revoked Proxy): validating an argument must not fail on its message.
  if (typeof value === "object") {
    const name = shown(value);
    return name === "(an object)" ? "an object" : name.slice(1, -1);
  }
  return shown(value);
}
