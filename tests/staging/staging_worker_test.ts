import assert from "node:assert/strict";
import { CudaError } from "../../mod.ts";
import { describeWorkerError, workerFailure } from "../../src/staging/staging_worker.ts";

Deno.test("a CUDA failure in a staging Worker reaches the main thread as a CudaError", () => {
  const original = new CudaError(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "stage and copy");
  // What crosses the boundary is what structured cloning keeps.
  const crossed = workerFailure(structuredClone(describeWorkerError(original)));
  assert.ok(crossed instanceof CudaError);
  assert.equal(crossed.cudaName, "CUDA_ERROR_OUT_OF_MEMORY");
  assert.equal(crossed.code, 2);
  assert.equal(crossed.message, original.message);
});

Deno.test("any other failure in a staging Worker reaches the main thread as an Error with its message", () => {
  const crossed = workerFailure(structuredClone(describeWorkerError(new RangeError("bad piece"))));
  assert.ok(!(crossed instanceof CudaError));
  assert.equal(crossed.message, "bad piece");
});
