import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { Kernel } from "../../src/gpu/kernel.ts";
import { PARAM_BYTES, parameterOffsets, type ParamType } from "../../src/gpu/kernel_params.ts";

// What a launch checks before any CUDA call, on a Kernel made without a
// module (tests/gpu_api_test.ts has the limits, the args count and the
// config's own keys; tests/gpu/kernels_test.ts launches on a GPU).

const owner = { assertLive() {}, begin() {}, end: () => {} };
const kernelOf = (params: ParamType[]) => new Kernel(owner, 0, 0, "k", params);
/** Launching with `args` on a kernel of `params`: the error it throws (none would need a GPU). */
const launchError = (params: ParamType[], args: unknown[]) => {
  try {
    kernelOf(params).launch({ grid: 1, block: 1, args: args as never });
  } catch (error) {
    return error as Error;
  }
  assert.fail("launched");
};

Deno.test("PARAM_BYTES: pointers and 64-bit types take 8 bytes, 32-bit ones 4; the table is frozen", () => {
  assert.deepEqual({ ...PARAM_BYTES }, { ptr: 8, i32: 4, u32: 4, i64: 8, u64: 8, f32: 4, f64: 8 });
  assert.ok(Object.isFrozen(PARAM_BYTES));
});

Deno.test("parameterOffsets: 4-byte parameters pack, an 8-byte one after them is aligned to 8", () => {
  assert.deepEqual(parameterOffsets(["f32", "f32", "ptr"]), {
    offsets: new Int32Array([0, 4, 8]),
    bytes: 16,
  });
  assert.deepEqual(parameterOffsets(["i32", "i64", "u32"]), {
    offsets: new Int32Array([0, 8, 16]),
    bytes: 20,
  });
  assert.deepEqual(parameterOffsets(["f64"]), { offsets: new Int32Array([0]), bytes: 8 });
});

Deno.test("a Kernel keeps its name and a frozen copy of its parameter types", () => {
  const params: ParamType[] = ["ptr", "u32"];
  const kernel = kernelOf(params);
  params.push("f64");
  assert.equal(kernel.name, "k");
  assert.deepEqual(kernel.params, ["ptr", "u32"]);
  assert.ok(Object.isFrozen(kernel.params));
  assert.equal(kernel.device, "cuda:0");
  assert.equal(Deno.inspect(kernel), "Kernel(k(ptr, u32), cuda:0)");
});

Deno.test("launch: a config that is not an object, or has an unknown option, is a TypeError", () => {
  const kernel = kernelOf([]);
  assert.throws(() => kernel.launch(null as never), {
    name: "TypeError",
    message: "Invalid config: expected an object, got null",
  });
  assert.throws(() => kernel.launch({ grid: 1, block: 1, args: [], blocks: 2 } as never), {
    name: "TypeError",
    message:
      'Invalid config option "blocks": expected one of grid, block, sharedBytes, args, stream, after',
  });
});

Deno.test("launch: a disposed module is refused before the arguments are read", () => {
  const gone = new Kernel(
    {
      assertLive(what) {
        throw new TypeError(`Cannot ${what}: the module was disposed`);
      },
      begin() {},
      end: () => {},
    },
    0,
    0,
    "k",
    [],
  );
  assert.throws(() => gone.launch({ grid: 1, block: 1, args: null as never }), {
    name: "TypeError",
    message: 'Cannot launch kernel "k": the module was disposed',
  });
});

Deno.test("launch: grid and block are a number or [x, y?, z?] of integers within the device limits", () => {
  const kernel = kernelOf([]);
  const error = (grid: unknown) => () => kernel.launch({ grid: grid as never, block: 1, args: [] });
  assert.throws(error([]), {
    name: "TypeError",
    message: "Invalid grid: expected a number or [x, y?, z?], got Array",
  });
  assert.throws(error([1, 1, 1, 1]), { name: "TypeError", message: /^Invalid grid:/ });
  assert.throws(error("1"), { name: "TypeError", message: /got "1"$/ });
  assert.throws(error(0), {
    name: "RangeError",
    message: "Invalid grid: expected an integer from 1 to 2147483647, got 0",
  });
  assert.throws(error(1.5), { name: "RangeError", message: /^Invalid grid: .* got 1\.5$/ });
  assert.throws(error([1, 65536]), {
    name: "RangeError",
    message: "Invalid grid[1]: expected an integer from 1 to 65535, got 65536",
  });
  assert.throws(error([1, 1, 65536]), { name: "RangeError", message: /^Invalid grid\[2\]/ });
  assert.throws(error([1, "2"]), { name: "RangeError", message: /^Invalid grid\[1\]: .*got "2"$/ });
  assert.throws(() => kernel.launch({ grid: 1, block: [1025], args: [] }), {
    name: "RangeError",
    message: "Invalid block[0]: expected an integer from 1 to 1024, got 1025",
  });
});

Deno.test("launch: sharedBytes must be a non-negative integer", () => {
  const kernel = kernelOf([]);
  for (const sharedBytes of [-1, 0.5, NaN]) {
    assert.throws(() => kernel.launch({ grid: 1, block: 1, sharedBytes, args: [] }), {
      name: "RangeError",
      message: /^Invalid sharedBytes: expected an integer from 0 to 4294967295/,
    });
  }
});

Deno.test("launch: 32-bit integer arguments must be integers in their type's range", () => {
  assert.equal(
    launchError(["i32"], [2 ** 31]).message,
    "Invalid args[0]: 2147483648 is out of range for i32",
  );
  assert.equal(launchError(["i32"], [-(2 ** 31) - 1]).name, "RangeError");
  assert.equal(launchError(["u32"], [-1]).message, "Invalid args[0]: -1 is out of range for u32");
  assert.equal(launchError(["u32"], [2 ** 32]).name, "RangeError");
  assert.equal(
    launchError(["u32", "i32"], [0, 1.5]).message,
    "Invalid args[1]: expected an integer for i32, got 1.5",
  );
  const bigint = launchError(["u32"], [1n]);
  assert.equal(bigint.name, "TypeError");
  assert.equal(bigint.message, "Invalid args[0]: expected an integer number for u32, got 1");
});

Deno.test("launch: 64-bit integer arguments take safe integers or bigints in their type's range", () => {
  assert.equal(
    launchError(["i64"], [2 ** 53]).message,
    `Invalid args[0]: ${2 ** 53} is out of range for i64`,
  );
  assert.equal(launchError(["u64"], [-1]).message, "Invalid args[0]: -1 is out of range for u64");
  assert.equal(launchError(["u64"], [-1n]).message, "Invalid args[0]: -1 is out of range for u64");
  assert.equal(launchError(["u64"], [2n ** 64n]).name, "RangeError");
  assert.equal(launchError(["i64"], [2n ** 63n]).name, "RangeError");
  assert.equal(launchError(["i64"], [-(2n ** 63n) - 1n]).name, "RangeError");
  assert.equal(
    launchError(["i64"], ["1"]).message,
    'Invalid args[0]: expected an integer number or a bigint for i64, got "1"',
  );
});

Deno.test("launch: float arguments take numbers only; pointers take a Tensor or a bigint", () => {
  assert.equal(
    launchError(["f32"], [1n]).message,
    "Invalid args[0]: expected a number for f32, got 1",
  );
  assert.equal(launchError(["f64"], [true]).name, "TypeError");
  assert.equal(
    launchError(["ptr"], [4096]).message,
    "Invalid args[0]: expected a Tensor or a bigint device address for ptr, got 4096",
  );
  assert.equal(launchError(["ptr"], [-1n]).message, "Invalid args[0]: -1 is out of range for ptr");
});

Deno.test("launch: a tensor argument must be a live tensor on the kernel's device, for a ptr", () => {
  const cpu = Tensor.from(new Float32Array(4), [4]);
  try {
    assert.equal(
      launchError(["u32"], [cpu]).message,
      "Invalid args[0]: expected an integer number for u32, got Tensor",
    );
    const onCpu = launchError(["ptr"], [cpu]);
    assert.equal(onCpu.name, "TypeError");
    assert.equal(onCpu.message, "Invalid args[0]: expected a tensor on cuda:0, got one on cpu");
  } finally {
    cpu.dispose();
  }
  assert.equal(launchError(["ptr"], [cpu]).message, "Invalid args[0]: the tensor was disposed");
});

Deno.test({
  name: "launch: an argument whose constructor getter throws is a TypeError naming it",
  fn() {
    const hostile = {
      get constructor(): never {
        throw new Error("from the getter");
      },
    };
    const error = launchError(["u32"], [hostile]);
    assert.equal(error.name, "TypeError");
    assert.match(error.message, /^Invalid args\[0\]: expected an integer number for u32/);
  },
});
