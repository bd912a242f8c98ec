/**
 * Calling the shim: the only file that reads `lib.symbols` (the loaded
 * library's functions, `sym()`), the out-parameter scratch the calls share
 * (one call at a time: JavaScript is single-threaded and no call awaits
 * before reading its results back), and the one funnel from a failed status
 * to a thrown {@linkcode CudaError} (`check`). Every other file of ffi/ wraps
 * shim functions through these; everything above ffi/ sees numbers and
 * `CudaError`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { check } from "./shim_call.ts";
 * check(0, "do nothing"); // a zero status throws nothing
 * assert.ok(true);
 * ```
 *
 * @module
 */

import { CudaError } from "./cuda_error.ts";
import { getLibrary, type ShimLibrary } from "./library.ts";

let lib: ShimLibrary["symbols"] | undefined;

/**
 * The shim's functions, loading the shim on first use (lazily: importing the
 * library must not need the shim, so that CPU-only code runs without it).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { sym } from "./shim_call.ts";
 * assert.equal(typeof sym().mtc_abi_version, "function");
 * ```
 */
export function sym(): ShimLibrary["symbols"] {
  return lib ??= getLibrary().symbols;
}

/**
 * Out-parameters of the shim's calls (addresses and handles as doubles),
 * shared: each caller reads its results before the next call.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { out } from "./shim_call.ts";
 * assert.equal(out.length, 4);
 * ```
 */
export const out = new Float64Array(4);

/**
 * The out-parameters of `mtc_cuda_status` (driver version, device count,
 * minimum driver version).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { statusOut } from "./shim_call.ts";
 * assert.equal(statusOut.length, 3);
 * ```
 */
export const statusOut = new Int32Array(3);

/**
 * A C string the shim returned (static storage), or "unknown error" for null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cString } from "./shim_call.ts";
 * assert.equal(cString(null), "unknown error");
 * ```
 */
export function cString(pointer: Deno.PointerValue): string {
  return pointer === null ? "unknown error" : Deno.UnsafePointerView.getCString(pointer);
}

/**
 * Builds the error for a failed status without throwing it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cudaError } from "./shim_call.ts";
 * const error = cudaError(2, "allocate 4 bytes");
 * assert.match(error.message, /^Cannot allocate 4 bytes: /);
 * ```
 */
export function cudaError(status: number, op: string): CudaError {
  const s = sym();
  return new CudaError(
    status,
    cString(s.mtc_error_name(status)),
    cString(s.mtc_error_string(status)),
    op,
  );
}

/**
 * Throws the {@linkcode CudaError} of a failed (non-zero) status; `op` says
 * what was being done ("allocate 4096 bytes of device memory"), built only
 * on failure when it is a function.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CudaError } from "./cuda_error.ts";
 * import { check } from "./shim_call.ts";
 * check(0, "do nothing");
 * assert.throws(() => check(2, () => "allocate 4 bytes"), CudaError);
 * ```
 */
export function check(status: number, op: string | (() => string)): void {
  if (status !== 0) {
    throw cudaError(status, typeof op === "string" ? op : op());
  }
}
