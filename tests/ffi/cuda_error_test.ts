import assert from "node:assert/strict";
import {
  CUDA_ERROR_NOT_SUPPORTED,
  CUDA_NOT_READY,
  CudaError,
  MTC_E_BAD_ARGUMENT,
  MTC_E_DRIVER_TOO_OLD,
  MTC_E_NO_DRIVER,
  MTC_E_STOPPED,
  MTC_E_WRONG_DEVICE,
} from "../../ffi/cuda_error.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import { deviceCount } from "../../mod.ts";

Deno.test("a CudaError says what failed in the grammar 'Cannot <op>: <name> (<code>): <text>'", () => {
  const error = new CudaError(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "allocate 8 bytes");
  assert.equal(
    error.message,
    "Cannot allocate 8 bytes: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory",
  );
  assert.equal(error.name, "CudaError");
  assert.deepEqual(
    [error.code, error.cudaName, error.text, error.op],
    [2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "allocate 8 bytes"],
  );
  assert.ok(error instanceof Error);
  assert.match(String(error), /^CudaError: Cannot allocate 8 bytes: /);
});

Deno.test("each status code the library tells apart is the one the shim gives that name", () => {
  // The constants are copies of native/driver.h's: a drifted one would make
  // the library read, say, a stopped stager as another failure.
  const names: [number, string][] = [
    [MTC_E_BAD_ARGUMENT, "MTC_ERROR_BAD_ARGUMENT"],
    [MTC_E_NO_DRIVER, "MTC_ERROR_NO_DRIVER"],
    [MTC_E_DRIVER_TOO_OLD, "MTC_ERROR_DRIVER_TOO_OLD"],
    [MTC_E_STOPPED, "MTC_ERROR_STOPPED"],
    [MTC_E_WRONG_DEVICE, "MTC_ERROR_WRONG_DEVICE"],
  ];
  for (const [code, name] of names) {
    const error = cudaError(code, "test");
    assert.equal(error.cudaName, name, `code ${code}`);
    assert.equal(error.code, code);
    assert.notEqual(error.text, "unrecognized CUDA error code", name);
  }
});

Deno.test({
  name: "the CUDA codes the library tests for are the driver's NOT_READY and NOT_SUPPORTED",
  ignore: deviceCount() === 0,
  fn() {
    // Only the driver names CUDA's own codes (cuGetErrorName).
    assert.equal(cudaError(CUDA_NOT_READY, "test").cudaName, "CUDA_ERROR_NOT_READY");
    assert.equal(cudaError(CUDA_ERROR_NOT_SUPPORTED, "test").cudaName, "CUDA_ERROR_NOT_SUPPORTED");
    assert.equal(cudaError(2, "test").cudaName, "CUDA_ERROR_OUT_OF_MEMORY");
  },
});
