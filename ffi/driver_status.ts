/**
 * What the shim found of the CUDA driver (`mtc_cuda_status`): whether CUDA
 * can be used and, where not, why (src/device.ts turns it into
 * `cudaStatus()`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { driverStatus } from "./driver_status.ts";
 * const { status, deviceCount } = driverStatus();
 * assert.ok(status !== 0 || deviceCount >= 0);
 * ```
 *
 * @module
 */

import { cString, statusOut, sym } from "./shim_call.ts";

/** What the shim found of the CUDA driver (see `mtc_cuda_status`). */
export interface DriverStatus {
  /** 0 when CUDA is usable (with 0 or more devices), else why not. */
  readonly status: number;
  /** The error's name, e.g. `"MTC_ERROR_NO_DRIVER"` (`""` when status is 0). */
  readonly name: string;
  /** The error's text. */
  readonly text: string;
  /** The dynamic loader's message, or a missing entry point's name. */
  readonly detail: string;
  /** The driver's CUDA version as `cuDriverGetVersion` writes it (12040), 0 when unknown. */
  readonly driverVersion: number;
  /** The oldest driver version the shim accepts. */
  readonly minDriverVersion: number;
  /** Usable devices. */
  readonly deviceCount: number;
}

/**
 * Loads the CUDA driver (once) and says what it found.
 *
 * @throws {Error} only when the shim itself is not loaded
 */
export function driverStatus(): DriverStatus {
  const s = sym();
  const status = s.mtc_cuda_status(statusOut);
  return {
    status,
    name: status === 0 ? "" : cString(s.mtc_error_name(status)),
    text: status === 0 ? "" : cString(s.mtc_error_string(status)),
    detail: cString(s.mtc_cuda_status_detail()),
    driverVersion: statusOut[0],
    deviceCount: statusOut[1],
    minDriverVersion: statusOut[2],
  };
}
