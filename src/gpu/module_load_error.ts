/**
 * `ModuleLoadError`: the driver could not load a module; the error carries
 * the JIT's log, which says why (a PTX syntax error, an architecture the
 * driver cannot compile for).
 *
 * @module
 */

import { CudaError } from "../../ffi/cuda_error.ts";

/**
 * The driver could not load a module: a `CudaError` (e.g.
 * `CUDA_ERROR_INVALID_PTX`) that carries the JIT's error log.
 *
 * @example Read the JIT's log of PTX that does not compile
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount, loadModule, ModuleLoadError } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   const error = await loadModule(".version 7.0\n.target sm_75\nnot ptx").catch((e) => e);
 *   assert.ok(error instanceof ModuleLoadError);
 *   assert.equal(typeof error.log, "string");
 * }
 * ```
 */
export class ModuleLoadError extends CudaError {
  /** The JIT's error log (`""` when it wrote none). */
  readonly log: string;

  /** Wraps the failure `cause` with the JIT's `log`. */
  constructor(cause: CudaError, log: string) {
    super(cause.code, cause.cudaName, log ? `${cause.text}\n${log}` : cause.text, cause.op);
    this.name = "ModuleLoadError";
    this.log = log;
  }
}
