import assert from "node:assert/strict";
import { CudaError, MTC_E_BAD_ARGUMENT } from "../../ffi/cuda_error.ts";
import { getLibrary } from "../../ffi/library.ts";
import { check, cString, cudaError, sym } from "../../ffi/shim_call.ts";

Deno.test("check() of a zero status throws nothing and never builds the operation's text", () => {
  let built = 0;
  check(0, () => `allocate ${++built} bytes`);
  assert.equal(built, 0);
});

Deno.test("check() of a non-zero status throws the CudaError naming the shim's error and the operation", () => {
  let built = 0;
  assert.throws(() => check(MTC_E_BAD_ARGUMENT, () => `copy ${++built} bytes`), (error) => {
    assert.ok(error instanceof CudaError);
    assert.equal(error.code, MTC_E_BAD_ARGUMENT);
    assert.equal(error.cudaName, "MTC_ERROR_BAD_ARGUMENT");
    assert.equal(error.text, "invalid argument");
    assert.equal(error.op, "copy 1 bytes");
    assert.equal(
      error.message,
      "Cannot copy 1 bytes: MTC_ERROR_BAD_ARGUMENT (100002): invalid argument",
    );
    return true;
  });
  assert.equal(built, 1, "the operation's text is built once, on failure");
  assert.throws(() => check(-1, "do something"), {
    name: "CudaError",
    message: /^Cannot do something: /,
  });
});

Deno.test("cudaError() builds the same error as check() throws, without throwing", () => {
  const error = cudaError(MTC_E_BAD_ARGUMENT, "free pinned host memory");
  assert.ok(error instanceof CudaError);
  assert.equal(
    error.message,
    "Cannot free pinned host memory: MTC_ERROR_BAD_ARGUMENT (100002): invalid argument",
  );
});

Deno.test("a code the shim does not know still becomes a CudaError with the shim's fallback name", () => {
  // Where a driver is loaded it names its own codes; 999999 is nobody's.
  const error = cudaError(999999, "test");
  assert.equal(error.cudaName, "CUDA_ERROR_UNRECOGNIZED");
  assert.equal(error.code, 999999);
});

Deno.test("cString() reads a C string the shim returned, and names a null one 'unknown error'", () => {
  assert.equal(cString(null), "unknown error");
  assert.equal(cString(sym().mtc_error_name(MTC_E_BAD_ARGUMENT)), "MTC_ERROR_BAD_ARGUMENT");
});

Deno.test("sym() is the loaded shim's symbol table, the same object each call", () => {
  assert.equal(sym(), getLibrary().symbols);
  assert.equal(sym(), sym());
});
