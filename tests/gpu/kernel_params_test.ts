import assert from "node:assert/strict";
import {
  argError,
  checkAgainstImage,
  checkParamTypes,
  PARAM_TYPES,
  rangeError,
} from "../../src/gpu/kernel_params.ts";

// A kernel's declared parameters, without a GPU: the declaration's check,
// the check against the image's layout (as the driver gives it), and the
// errors for arguments. (Offsets and sizes: tests/gpu/kernel_test.ts.)

Deno.test("checkParamTypes: an array of known types passes; anything else names the list or the item", () => {
  checkParamTypes(["ptr", "i32", "u32", "i64", "u64", "f32", "f64"]);
  checkParamTypes([]);
  assert.throws(() => checkParamTypes("ptr"), {
    name: "TypeError",
    message: 'Invalid params: expected an array of parameter types, got "ptr"',
  });
  assert.throws(() => checkParamTypes(["ptr", "float"]), {
    name: "TypeError",
    message: 'Invalid params[1]: expected one of ptr, i32, u32, i64, u64, f32, f64, got "float"',
  });
  assert.deepEqual([...PARAM_TYPES], ["ptr", "i32", "u32", "i64", "u64", "f32", "f64"]);
});

Deno.test("checkAgainstImage: no image (an older driver) checks nothing; a matching layout passes", () => {
  checkAgainstImage("k", ["f64"], undefined);
  checkAgainstImage("k", ["u32", "ptr"], [{ offset: 0, size: 4 }, { offset: 8, size: 8 }]);
});

Deno.test("checkAgainstImage: a count that differs from the image's is a TypeError giving both", () => {
  assert.throws(
    () => checkAgainstImage("k", ["ptr"], [{ offset: 0, size: 8 }, { offset: 8, size: 4 }]),
    {
      name: "TypeError",
      message: 'Invalid params: kernel "k" takes 2 parameters (of 8, 4 bytes), got 1 (ptr)',
    },
  );
  assert.throws(() => checkAgainstImage("one", [], [{ offset: 0, size: 4 }]), {
    message: 'Invalid params: kernel "one" takes 1 parameter (of 4 bytes), got 0 ()',
  });
});

Deno.test("checkAgainstImage: a parameter of another size, or at another offset, names its index", () => {
  assert.throws(
    () => checkAgainstImage("k", ["u32", "u32"], [{ offset: 0, size: 4 }, { offset: 4, size: 8 }]),
    {
      name: "TypeError",
      message: 'Invalid params[1]: kernel "k" takes a 8-byte parameter there, got u32 (4 bytes)',
    },
  );
  // Sizes agree, the offset does not (the image packs where the ABI would pad).
  assert.throws(
    () => checkAgainstImage("k", ["u32", "u64"], [{ offset: 0, size: 4 }, { offset: 4, size: 8 }]),
    {
      message: 'Invalid params[1]: kernel "k" takes a 8-byte parameter there, got u64 (8 bytes)',
    },
  );
});

Deno.test("argError: says what each parameter type takes and what it got", () => {
  const cases = [
    ["ptr", "a Tensor or a bigint device address"],
    ["f32", "a number"],
    ["f64", "a number"],
    ["i32", "an integer number"],
    ["u32", "an integer number"],
    ["i64", "an integer number or a bigint"],
    ["u64", "an integer number or a bigint"],
  ] as const;
  for (const [type, expected] of cases) {
    const error = argError(3, type, "x");
    assert.ok(error instanceof TypeError);
    assert.equal(error.message, `Invalid args[3]: expected ${expected} for ${type}, got "x"`);
  }
});

Deno.test("rangeError: a RangeError naming the argument, its value and its type", () => {
  const error = rangeError(0, "u32", -1);
  assert.ok(error instanceof RangeError);
  assert.equal(error.message, "Invalid args[0]: -1 is out of range for u32");
});
