/**
 * What a status of the shim means: the codes the library tells apart (an
 * event not done yet, no driver, a stream of another device, ...) and
 * {@linkcode CudaError}, which every other failed status becomes
 * (ffi/shim_call.ts's `check` builds it).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CudaError, MTC_E_NO_DRIVER } from "./cuda_error.ts";
 * const error = new CudaError(MTC_E_NO_DRIVER, "MTC_ERROR_NO_DRIVER", "no driver", "load CUDA");
 * assert.equal(error.code, 100003);
 * ```
 *
 * @module
 */

/** CUDA_ERROR_NOT_READY: an event or stream still has work pending. */
export const CUDA_NOT_READY = 600;

/** Shim status code: an invalid argument, e.g. a buffer detached before the call (native/driver.h). */
export const MTC_E_BAD_ARGUMENT = 100002;
/** Shim status code: libcuda.so.1 cannot be loaded (native/driver.h). */
export const MTC_E_NO_DRIVER = 100003;
/** Shim status code: the driver is older than the shim accepts. */
export const MTC_E_DRIVER_TOO_OLD = 100004;
/** Shim status code: background staging was stopped (its isolate or the process is ending). */
export const MTC_E_STOPPED = 100006;

/** Shim status code: a stream of another device or context (native/driver.h). */
export const MTC_E_WRONG_DEVICE = 100007;

/** CUDA_ERROR_NOT_SUPPORTED: the driver cannot tell (e.g. parameter info before CUDA 12.4). */
export const CUDA_ERROR_NOT_SUPPORTED = 801;

/**
 * A CUDA driver call failed. The message names the operation and the CUDA
 * error, e.g. `Cannot allocate 4096 bytes of device memory on cuda:0:
 * CUDA_ERROR_OUT_OF_MEMORY (2): out of memory`.
 *
 * @example Telling CUDA failures apart from argument errors
 * ```ts
 * import { CudaError, startCopy } from "@mtc/core";
 * import assert from "node:assert/strict";
 * async function copy(batch: unknown, device: string): Promise<string> {
 *   try {
 *     await startCopy(batch, device).get();
 *     return "copied";
 *   } catch (error) {
 *     // A copy that failed on the GPU rejects with a CudaError naming the driver's error.
 *     if (error instanceof CudaError) return `CUDA failed: ${error.cudaName} (${error.op})`;
 *     // Bad arguments throw TypeError or RangeError, before anything starts.
 *     if (error instanceof TypeError || error instanceof RangeError) return "bad argument";
 *     throw error;
 *   }
 * }
 * assert.equal(await copy([new Float32Array(2)], "cpu"), "copied");
 * assert.equal(await copy([new Float32Array(2)], "gpu0"), "bad argument");
 * const error = new CudaError(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "allocate 4 bytes");
 * assert.ok(error instanceof CudaError && error instanceof Error);
 * assert.equal(error.message, "Cannot allocate 4 bytes: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
 * ```
 */
export class CudaError extends Error {
  /** The numeric status (a `CUresult`, or an `MTC_E_*` code of the shim above 100000). */
  readonly code: number;
  /** The CUDA error name, e.g. `"CUDA_ERROR_OUT_OF_MEMORY"`. */
  readonly cudaName: string;
  /** What was being done, e.g. `"allocate 4096 bytes of device memory"`. */
  readonly op: string;
  /** The CUDA error's description, e.g. `"out of memory"`. */
  readonly text: string;

  /** Creates the error; normally thrown by the wrappers of this module. */
  constructor(code: number, cudaName: string, text: string, op: string) {
    super(`Cannot ${op}: ${cudaName} (${code}): ${text}`);
    this.text = text;
    this.name = "CudaError";
    this.code = code;
    this.cudaName = cudaName;
    this.op = op;
  }
}
