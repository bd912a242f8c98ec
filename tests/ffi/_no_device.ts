/**
 * A device index that no machine has, for the ffi wrappers' failure paths:
 * the shim refuses it with `MTC_ERROR_NO_DRIVER` where libcuda.so.1 cannot
 * be loaded (this dev machine) and `MTC_ERROR_BAD_DEVICE` where it can (the
 * GPU machine), so these tests run, and can fail, on both.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CudaError } from "../../ffi/cuda_error.ts";

/** A device index past every machine's count (the shim tracks at most 64). */
export const NO_SUCH_DEVICE = 1000;

/** The names the shim gives a call on {@linkcode NO_SUCH_DEVICE}. */
export const UNUSABLE_DEVICE = /^MTC_ERROR_(NO_DRIVER|BAD_DEVICE)$/;

/** The statuses of those names (native/driver.h). */
export const UNUSABLE_DEVICE_CODES: readonly number[] = [100001, 100003];

/**
 * Asserts that `call` throws a {@linkcode CudaError} whose `op` is `op`,
 * whose CUDA name matches `cudaName`, and whose message is the grammar's
 * "Cannot <op>: <name> (<code>): <text>".
 */
export function assertCudaError(
  call: () => unknown,
  op: string,
  cudaName: RegExp = UNUSABLE_DEVICE,
): CudaError {
  let thrown: unknown;
  try {
    call();
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown instanceof CudaError, `expected a CudaError, got ${thrown}`);
  assert.equal(thrown.op, op);
  assert.match(thrown.cudaName, cudaName);
  assert.equal(
    thrown.message,
    `Cannot ${op}: ${thrown.cudaName} (${thrown.code}): ${thrown.text}`,
  );
  return thrown;
}
