import assert from "node:assert/strict";
import {
  functionLimits,
  functionParams,
  launch,
  LAUNCH_HEADER_BYTES,
  moduleFunction,
  moduleLoadOffThread,
  moduleUnload,
} from "../../ffi/kernel_modules.ts";
import { driverStatus } from "../../ffi/driver_status.ts";
import { hasGpu } from "../gpu/_helpers.ts";
import { assertCudaError, NO_SUCH_DEVICE, UNUSABLE_DEVICE_CODES } from "./_no_device.ts";

const d = NO_SUCH_DEVICE;
const root = new URL("../../", import.meta.url);

Deno.test("the launch buffer's header is as long as the shim reads it (native/modules.c)", async () => {
  const source = await Deno.readTextFile(new URL("native/modules.c", root));
  const header = source.match(/#define MTC_LAUNCH_HEADER_BYTES (\d+)/);
  assert.ok(header, "native/modules.c defines MTC_LAUNCH_HEADER_BYTES");
  assert.equal(LAUNCH_HEADER_BYTES, Number(header[1]));
});

Deno.test("a module that cannot be loaded resolves with the status and an empty log where the JIT never ran", async () => {
  const result = await moduleLoadOffThread(d, new TextEncoder().encode(".version 8.0\0"));
  assert.ok("status" in result, JSON.stringify(result));
  assert.ok(UNUSABLE_DEVICE_CODES.includes(result.status), `status ${result.status}`);
  assert.equal(result.log, "");
});

Deno.test("a kernel not found is a status, a launch's failure is its status, an unload's a CudaError", () => {
  const found = moduleFunction(d, 1, "sum_f32");
  assert.ok("status" in found && UNUSABLE_DEVICE_CODES.includes(found.status));
  assert.ok(
    UNUSABLE_DEVICE_CODES.includes(launch(d, 1, 1, 0, new Uint8Array(LAUNCH_HEADER_BYTES))),
  );
  assertCudaError(() => moduleUnload(d, 1), `unload a module of cuda:${d}`);
});

Deno.test("parameters and limits are undefined where the driver cannot tell, else a CudaError naming the kernel's device", () => {
  // Without the driver's entry point (CUDA_ERROR_NOT_SUPPORTED): undefined;
  // with it, the device index is refused.
  const { name, driverVersion } = driverStatus();
  const noDriver = name === "MTC_ERROR_NO_DRIVER";
  // cuFuncGetParamInfo came with CUDA 12.4.
  if (noDriver || driverVersion < 12040) assert.equal(functionParams(d, 1, 4), undefined);
  else {assertCudaError(() =>
      functionParams(d, 1, 4), `read the parameters of a kernel of cuda:${d}`);}
  if (noDriver) assert.equal(functionLimits(d, 1), undefined);
  else {assertCudaError(() =>
      functionLimits(d, 1), `read the launch limits of a kernel of cuda:${d}`);}
});

const ptx = () => Deno.readFile(new URL("examples/step_kernels.ptx", root));

Deno.test({
  name:
    "a PTX module loads off the main thread, its kernels are found, their parameters and limits read",
  ignore: !hasGpu,
  async fn() {
    const text = await ptx();
    const image = new Uint8Array(text.length + 1);
    image.set(text);
    const loaded = await moduleLoadOffThread(0, image);
    assert.ok("module" in loaded, JSON.stringify(loaded));
    try {
      const sum = moduleFunction(0, loaded.module, "sum_f32");
      assert.ok("function" in sum);
      const missing = moduleFunction(0, loaded.module, "no_such_kernel");
      assert.deepEqual(missing, { status: 500 }, "CUDA_ERROR_NOT_FOUND");
      const params = functionParams(0, sum.function, 8);
      if (driverStatus().driverVersion >= 12040) {
        // sum_f32(u64, u32, u64, u32), each aligned to its size.
        assert.deepEqual(params, [
          { offset: 0, size: 8 },
          { offset: 8, size: 4 },
          { offset: 16, size: 8 },
          { offset: 24, size: 4 },
        ]);
      }
      const limits = functionLimits(0, sum.function);
      assert.ok(limits && limits.maxThreadsPerBlock > 0, JSON.stringify(limits));
      assert.ok(limits.maxDynamicSharedBytes >= 0);
    } finally {
      moduleUnload(0, loaded.module);
    }
  },
});

Deno.test({
  name: "malformed PTX resolves with the driver's status and the JIT's log, not an exception",
  ignore: !hasGpu,
  async fn() {
    const image = new TextEncoder().encode(".version 8.0\n.target sm_50\nthis is not ptx\0");
    const loaded = await moduleLoadOffThread(0, image);
    assert.ok("status" in loaded, JSON.stringify(loaded));
    assert.equal(loaded.status, 218, "CUDA_ERROR_INVALID_PTX");
    assert.ok(loaded.log.length > 0, "the JIT wrote its log");
    assert.ok(!loaded.log.includes("\0"));
  },
});
