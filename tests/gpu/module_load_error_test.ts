import assert from "node:assert/strict";
import { CudaError } from "../../ffi/cuda_error.ts";
import { ModuleLoadError } from "../../src/gpu/module_load_error.ts";

// The error itself, built from a CudaError as loadModule builds it (a real
// refused image: tests/gpu/module_test.ts, on a GPU).

const cause = new CudaError(
  218,
  "CUDA_ERROR_INVALID_PTX",
  "a PTX JIT compilation failed",
  "load a module on cuda:0",
);

Deno.test("ModuleLoadError: a CudaError of the same code, name and op, carrying the JIT's log", () => {
  const error = new ModuleLoadError(cause, "ptxas fatal   : Unresolved extern function 'f'");
  assert.ok(error instanceof CudaError);
  assert.equal(error.name, "ModuleLoadError");
  assert.equal(error.code, 218);
  assert.equal(error.cudaName, "CUDA_ERROR_INVALID_PTX");
  assert.equal(error.op, "load a module on cuda:0");
  assert.equal(error.log, "ptxas fatal   : Unresolved extern function 'f'");
});

Deno.test("ModuleLoadError: the message is the CUDA error's, with the log on the lines after it", () => {
  const error = new ModuleLoadError(cause, "line 3: syntax error");
  assert.equal(
    error.message,
    "Cannot load a module on cuda:0: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed\nline 3: syntax error",
  );
});

Deno.test("ModuleLoadError: without a log the message is the CUDA error's alone", () => {
  const error = new ModuleLoadError(cause, "");
  assert.equal(error.log, "");
  assert.equal(error.message, cause.message);
});
