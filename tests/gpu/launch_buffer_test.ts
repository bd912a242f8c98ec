import assert from "node:assert/strict";
import { Tensor } from "../../mod.ts";
import { LaunchBuffer } from "../../src/gpu/launch_buffer.ts";

// The bytes a launch hands the driver, without a GPU: each argument at its
// parameter's offset past the 32-byte header, little-endian as the GPU
// reads it. (The errors through Kernel.launch: tests/gpu/kernel_test.ts.)

const HEADER = 32;

function view(buffer: LaunchBuffer): DataView {
  return new DataView(buffer.bytes.buffer);
}

Deno.test("LaunchBuffer: the header's last word is the argument bytes; the buffer is whole 8-byte words", () => {
  const buffer = new LaunchBuffer("k", 0, ["u32", "ptr", "f32"]);
  assert.equal(buffer.u32[7], 20);
  assert.equal(buffer.bytes.byteLength, HEADER + 24);
  assert.equal(new LaunchBuffer("none", 0, []).bytes.byteLength, HEADER);
});

Deno.test("LaunchBuffer.writeArgs(): 32-bit and float arguments land at their offsets", () => {
  const buffer = new LaunchBuffer("k", 0, ["i32", "u32", "f32", "f64"]);
  assert.equal(buffer.writeArgs([-2, 0xffffffff, 1.5, -0.25]), undefined);
  const v = view(buffer);
  assert.equal(v.getInt32(HEADER, true), -2);
  assert.equal(v.getUint32(HEADER + 4, true), 0xffffffff);
  assert.equal(v.getFloat32(HEADER + 8, true), 1.5);
  assert.equal(v.getFloat64(HEADER + 16, true), -0.25);
});

Deno.test("LaunchBuffer.writeArgs(): 64-bit integers from numbers and bigints, negative ones in two's complement", () => {
  const buffer = new LaunchBuffer("k", 0, ["i64", "u64", "i64", "ptr"]);
  buffer.writeArgs([-3, 2 ** 40 + 7, -(2n ** 63n), 0xdead_beef_0000n]);
  const v = view(buffer);
  assert.equal(v.getBigInt64(HEADER, true), -3n);
  assert.equal(v.getBigUint64(HEADER + 8, true), 2n ** 40n + 7n);
  assert.equal(v.getBigInt64(HEADER + 16, true), -(2n ** 63n));
  assert.equal(v.getBigUint64(HEADER + 24, true), 0xdead_beef_0000n);
});

Deno.test("LaunchBuffer.writeArgs(): a later launch overwrites the earlier arguments", () => {
  const buffer = new LaunchBuffer("k", 0, ["u32"]);
  buffer.writeArgs([1]);
  buffer.writeArgs([2]);
  assert.equal(view(buffer).getUint32(HEADER, true), 2);
});

Deno.test("LaunchBuffer.writeArgs(): the count, integers and ranges are checked, naming the argument", () => {
  const buffer = new LaunchBuffer("k", 0, ["u32", "i64"]);
  assert.throws(() => buffer.writeArgs([1]), {
    name: "TypeError",
    message: 'Invalid args: kernel "k" takes 2 arguments (u32, i64), got 1',
  });
  assert.throws(() => buffer.writeArgs({}), {
    name: "TypeError",
    message: "Invalid args: expected an array, got Object",
  });
  assert.throws(() => buffer.writeArgs([0.5, 0]), {
    name: "RangeError",
    message: "Invalid args[0]: expected an integer for u32, got 0.5",
  });
  assert.throws(() => buffer.writeArgs([2 ** 32, 0]), {
    name: "RangeError",
    message: "Invalid args[0]: 4294967296 is out of range for u32",
  });
  assert.throws(() => buffer.writeArgs([0, 2n ** 63n]), {
    name: "RangeError",
    message: "Invalid args[1]: 9223372036854775808 is out of range for i64",
  });
  assert.throws(() => buffer.writeArgs([0, 2 ** 53]), {
    name: "RangeError",
    message: "Invalid args[1]: 9007199254740992 is out of range for i64",
  });
});

Deno.test("LaunchBuffer.writeArgs(): a CPU tensor for a pointer is a TypeError naming both devices", () => {
  const buffer = new LaunchBuffer("k", 0, ["ptr"]);
  const cpu = Tensor.from(new Float32Array(2), [2]);
  try {
    assert.throws(() => buffer.writeArgs([cpu]), {
      name: "TypeError",
      message: "Invalid args[0]: expected a tensor on cuda:0, got one on cpu",
    });
  } finally {
    cpu.dispose();
  }
});
