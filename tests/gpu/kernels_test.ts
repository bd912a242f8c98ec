import assert from "node:assert/strict";
import { driverStatus } from "../../ffi/driver_status.ts";
import {
  CudaError,
  deviceCount,
  disposeAll,
  loadModule,
  ModuleLoadError,
  startCopy,
  Tensor,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { hasGpu, stepKernelsPtx, underSanitizer } from "./_helpers.ts";

// Kernels with only the driver: PTX JIT-compiled by it, parameters checked
// against the image where the driver can tell (CUDA 12.4+), arguments
// checked against the declared types, bad input refused synchronously and
// nothing leaked.

const gpu = { ignore: !hasGpu };

Deno.test({
  ...gpu,
  name: "the example PTX loads through the driver's JIT and its kernels compute what the CPU does",
  async fn() {
    const module = await loadModule(await stepKernelsPtx(), { device: "cuda:0" });
    const sum = module.kernel("sum_f32", ["ptr", "u32", "ptr", "u32"]);
    const values = Float32Array.from({ length: 5000 }, (_, i) => (i % 17) - 8);
    const [x, sums] = await startCopy([values, new Float32Array(3)], "cuda:0").get();
    const work = sum.launch({ grid: 1, block: 256, args: [x, values.length, sums, 2] });
    const [back] = await startCopy([sums], "cpu", { after: work }).get();
    assert.deepEqual([...back.toTypedArray()], [0, 0, values.reduce((a, b) => a + b, 0)]);
    await work.done();
    disposeAll([x, sums, back]);
    module.dispose();
    assert.throws(() => sum.launch({ grid: 1, block: 1, args: [x, 1, sums, 0] }), /disposed/);
  },
});

Deno.test({
  ...gpu,
  name: "loadModule() refuses malformed PTX with a ModuleLoadError carrying the JIT's log",
  async fn() {
    // (The sanitizer reports the driver's refusal, rightly: only the JIT can tell.)
    if (!underSanitizer) {
      const broken =
        ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry f() { bogus.instr; }";
      const error = await loadModule(broken).then(() => undefined, (e) => e);
      assert.ok(error instanceof ModuleLoadError && error instanceof CudaError, String(error));
      assert.equal(error.cudaName, "CUDA_ERROR_INVALID_PTX");
      assert.match(error.log, /bogus|error/i);
    }
    assert.throws(() => loadModule(""), TypeError);
    assert.throws(() => loadModule(42 as never), TypeError);
    assert.throws(() => loadModule("x", { device: "cpu" }), TypeError);
    assert.throws(() => loadModule("x", { device: "cuda:99" }), RangeError);
    assert.throws(() => loadModule("x", { stream: 1 } as never), TypeError);
  },
});

Deno.test({
  ...gpu,
  name: "kernel() and launch() refuse bad names, parameters and arguments synchronously",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    // (Only the driver can tell; the sanitizer reports its refusal, rightly.)
    if (!underSanitizer) {
      assert.throws(() => module.kernel("no_such_kernel", []), /no kernel of that name/);
    }
    assert.throws(() => module.kernel("noop", ["int" as never]), /Invalid params\[0\]/);
    if (driverStatus().driverVersion >= 12040) {
      // The driver tells the kernel's parameter layout: count and sizes are checked.
      assert.throws(() => module.kernel("scale_f32", ["ptr", "f32"]), /takes 4 parameters/);
      assert.throws(
        () => module.kernel("scale_f32", ["ptr", "f64", "f32", "u32"]),
        /Invalid params\[1\]/,
      );
    }
    const scale = module.kernel("scale_f32", ["ptr", "f32", "f32", "u32"]);
    const [x] = await startCopy([new Float32Array(4)], "cuda:0").get();
    const cpu = Tensor.from(new Float32Array(4));
    const launch = (config: Record<string, unknown>) => () =>
      scale.launch({ grid: 1, block: 4, args: [x, 1, 0, 4], ...config } as never);
    assert.throws(launch({ args: [x, 1, 0] }), /takes 4 arguments/);
    assert.throws(launch({ args: [x, "1", 0, 4] }), /Invalid args\[1\]: expected a number/);
    assert.throws(launch({ args: [x, 1, 0, -1] }), RangeError);
    assert.throws(launch({ args: [x, 1, 0, 2 ** 32] }), RangeError);
    assert.throws(launch({ args: [x, 1, 0, 1.5] }), RangeError);
    assert.throws(launch({ args: [cpu, 1, 0, 4] }), /expected a tensor on cuda:0, got one on cpu/);
    assert.throws(launch({ args: [1, 1, 0, 4] }), /Invalid args\[0\]: expected a Tensor/);
    assert.throws(launch({ grid: 0 }), /Invalid grid/);
    assert.throws(launch({ block: [1, 2, 3, 4] }), /Invalid block/);
    assert.throws(launch({ stream: {} }), /Invalid stream/);
    assert.throws(launch({ after: [1] }), /Invalid after\[0\]/);
    assert.throws(launch({ speed: 1 }), /Invalid config option "speed"/);
    // The kernel's own limits, as the driver gives them, refuse before the driver sees it.
    assert.throws(
      launch({ sharedBytes: 1 << 30 }),
      /Invalid sharedBytes: expected an integer from 0 to/,
    );
    assert.throws(launch({ sharedBytes: 0.5 }), RangeError);
    assert.throws(
      launch({ block: [32, 64] }),
      /Invalid block: expected at most \d+ threads per block/,
    );
    assert.throws(
      launch({ block: [1, 1, 65] }),
      /Invalid block\[2\]: expected an integer from 1 to 64/,
    );
    assert.throws(launch({ grid: [1, 65536] }), /Invalid grid\[1\]/);
    // A launch the driver refuses is a CudaError, and leaves no hold behind.
    const inUse = devicePool(0).inUseBytes;
    testAids!.injectFault("kernel", { error: 1 });
    assert.throws(launch({}), { name: "CudaError", message: /CUDA_ERROR_INVALID_VALUE/ });
    x.dispose();
    assert.ok(devicePool(0).inUseBytes < inUse, "the refused launch kept no hold on x");
    assert.throws(() => scale.launch({ grid: 1, block: 4, args: [x, 1, 0, 4] }), /disposed/);
    if (deviceCount() > 1) {
      const [other] = await startCopy([new Float32Array(4)], "cuda:1").get();
      assert.throws(launch({ args: [other, 1, 0, 4] }), RangeError);
      other.dispose();
    }
    module.dispose();
  },
});

Deno.test({
  ...gpu,
  name: "launch() takes 64-bit integers as numbers or bigints, and raw device addresses",
  async fn() {
    const module = await loadModule(await stepKernelsPtx());
    const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
    const source = Uint8Array.from({ length: 300 }, (_, i) => i & 255);
    const [src, dst] = await startCopy([source, new Uint8Array(300)], "cuda:0").get();
    const dstAddress = BigInt(Deno.UnsafePointer.value(dst.ptr));
    const work = copyU8.launch({ grid: 2, block: 128, args: [src, dstAddress, 300n] });
    const [back] = await startCopy([dst], "cpu", { after: work }).get();
    assert.deepEqual(back.toTypedArray(), source);
    assert.throws(
      () => copyU8.launch({ grid: 1, block: 1, args: [src, dst, -1n] }),
      /out of range for u64/,
    );
    disposeAll([src, dst, back]);
    module.dispose();
  },
});
