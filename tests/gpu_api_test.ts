import assert from "node:assert/strict";
import {
  CudaModule,
  CudaStream,
  disposeAll,
  GpuWork,
  loadModule,
  startCopy,
  Tensor,
} from "../mod.ts";
import { Kernel } from "../src/gpu/kernel.ts";
import { parameterOffsets } from "../src/gpu/kernel_params.ts";

// The checks of the GPU-work API that need no GPU: they run before any
// CUDA call, so a bad argument is refused the same way everywhere.

Deno.test("parameterOffsets() lays parameters out as the CUDA ABI does (each aligned to its size)", () => {
  const { offsets, bytes } = parameterOffsets(["ptr", "u32", "ptr", "f32", "f64", "i32", "i64"]);
  assert.deepEqual([...offsets], [0, 8, 16, 24, 32, 40, 48]);
  assert.equal(bytes, 56);
  assert.deepEqual([...parameterOffsets(["u32", "u64"]).offsets], [0, 8]);
  assert.equal(parameterOffsets([]).bytes, 0);
});

Deno.test("startCopy({ after }) refuses what is no copy handle, work or stream, synchronously", () => {
  assert.throws(() => startCopy([new Float32Array(2)], "cpu", { after: 5 as never }), {
    name: "TypeError",
    message: /Invalid option after: expected an AsyncCopyHandle, a GpuWork or a CudaStream/,
  });
  assert.throws(
    () => startCopy([new Float32Array(2)], "cpu", { after: [{}] as never }),
    /Invalid option after\[0\]/,
  );
});

Deno.test("startCopy({ after }) refuses a list with holes, naming the hole, synchronously", () => {
  // forEach skipped holes: the check passed and the ordering then read
  // undefined ("Cannot read properties of undefined (reading '#index')").
  const done = startCopy([new Float32Array(1)], "cpu");
  for (const after of [[, done], new Array(2), [done, , done]]) {
    assert.throws(() => startCopy([new Float32Array(2)], "cpu", { after: after as never }), {
      name: "TypeError",
      message: /^Invalid option after\[[01]\]: expected an AsyncCopyHandle.*got undefined$/,
    });
  }
});

Deno.test("startCopy({ after }) uses the list it checked, whatever a Proxy of it answers later", () => {
  const done = startCopy([new Float32Array(1)], "cpu");
  let reads = 0;
  // The first read of each index gives a handle, later ones something else.
  const shifty = new Proxy([done], {
    get(target, key, receiver) {
      if (key === "0") return reads++ === 0 ? done : 42;
      return Reflect.get(target, key, receiver);
    },
  });
  const copy = startCopy([new Float32Array(2)], "cpu", { after: shifty as never });
  assert.equal(copy.ready(), true);
  assert.equal(reads, 1);
});

Deno.test("dispose({ after }) and disposeAll({ after }) refuse a bad after and dispose nothing", () => {
  const tensor = Tensor.from(new Float32Array(2));
  assert.throws(() => tensor.dispose({ after: "stream" as never }), TypeError);
  assert.equal(tensor.disposed, false);
  assert.throws(() => disposeAll([tensor], { after: null as never }), TypeError);
  assert.equal(tensor.disposed, false);
  const handle = startCopy([new Float32Array(2)], "cpu");
  disposeAll([tensor], { after: handle });
  assert.equal(tensor.disposed, true);
});

Deno.test("loadModule() refuses an empty or non-binary image synchronously", () => {
  assert.throws(() => loadModule(""), /Invalid image/);
  assert.throws(() => loadModule(new Uint8Array(0)), /Invalid image/);
  assert.throws(() => loadModule(new Float32Array(4) as never), /Invalid image/);
});

Deno.test("the example PTX asks for an ISA that drivers from CUDA 11 JIT-compile", async () => {
  const ptx = await Deno.readTextFile(new URL("../examples/step_kernels.ptx", import.meta.url));
  assert.match(ptx, /^\.version 7\.0$/m);
  assert.match(ptx, /^\.target sm_75$/m);
  const { STEP_KERNELS_PTX } = await import("../examples/step_kernels_ptx.ts");
  assert.equal(STEP_KERNELS_PTX, ptx, "the module holds the committed PTX");
  for (const kernel of ["sum_f32", "scale_f32", "copy_u8", "spin_ns", "write_u32", "noop"]) {
    assert.match(ptx, new RegExp(`^\\.visible \\.entry ${kernel}\\(`, "m"));
  }
});

Deno.test("a Kernel's launch buffer takes any parameter list (4-byte ones included)", () => {
  const owner = { assertLive() {}, begin() {}, end: () => {} };
  for (const params of [[], ["u32"], ["ptr", "u32"], ["f32", "f32", "f32"]] as const) {
    const kernel = new Kernel(owner, 0, 0, "k", params);
    assert.deepEqual(kernel.params, params);
  }
});

Deno.test("launch() refuses blocks and shared memory past the kernel's limits before any CUDA call", () => {
  const owner = { assertLive() {}, begin() {}, end: () => {} };
  const limits = { maxThreadsPerBlock: 256, maxDynamicSharedBytes: 1024 };
  const kernel = new Kernel(owner, 0, 0, "k", ["u32"], limits);
  const launch = (config: Record<string, unknown>) => () =>
    kernel.launch({ grid: 1, block: 1, args: [1], ...config } as never);
  assert.throws(launch({ block: 512 }), {
    name: "RangeError",
    message: 'Invalid block: expected at most 256 threads per block for kernel "k", got 512',
  });
  assert.throws(launch({ block: [16, 32] }), /at most 256 threads per block/);
  assert.throws(
    launch({ block: [1, 1, 65] }),
    /Invalid block\[2\]: expected an integer from 1 to 64/,
  );
  assert.throws(
    launch({ block: [1, 1025] }),
    /Invalid block\[1\]: expected an integer from 1 to 1024/,
  );
  assert.throws(launch({ sharedBytes: 1025 }), {
    name: "RangeError",
    message: /Invalid sharedBytes: expected an integer from 0 to 1024/,
  });
  // Without limits from the driver: every GPU's own (1024 threads per block).
  const unknown = new Kernel(owner, 0, 0, "k", ["u32"]);
  assert.throws(
    () => unknown.launch({ grid: 1, block: [32, 64], args: [1] }),
    /at most 1024 threads per block/,
  );
});

Deno.test("new GpuWork() throws TypeError, and later copies are unharmed", async () => {
  // Forged work entered the queues that every startCopy polls: each later
  // copy, CPU ones included, threw "Invalid FFI i32 type, expected integer".
  const Forge = GpuWork as unknown as new (...args: unknown[]) => unknown;
  assert.throws(() => new Forge(), {
    name: "TypeError",
    message: /^Cannot construct a GpuWork directly/,
  });
  assert.throws(() => new Forge(0, 0, 1, "forged"), TypeError);
  const [copied] = await startCopy([new Float32Array([1, 2])], "cpu").get();
  assert.deepEqual([...copied.toTypedArray()], [1, 2]);
});

Deno.test("new CudaStream() and new CudaModule() throw TypeError naming the way to make one", () => {
  // Private only to TypeScript: a forged stream or module carried a made-up
  // address that dispose() would hand to the driver.
  for (
    const [Forge, way] of [[CudaStream, /createStream/], [CudaModule, /loadModule/]] as const
  ) {
    const Constructor = Forge as unknown as new (...args: unknown[]) => unknown;
    assert.throws(() => new Constructor(0, 4096, 0), { name: "TypeError", message: way });
  }
});

Deno.test("launch() checks args and after before the default stream is made, and reads only the config's own keys", () => {
  const owner = { assertLive() {}, begin() {}, end: () => {} };
  const kernel = new Kernel(owner, 0, 0, "k", ["u32", "ptr"]);
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ args: null }, /Invalid args: expected an array/],
    [{ args: [1] }, /Invalid args: kernel "k" takes 2 arguments/],
    [{ args: [-1, 0n] }, /Invalid args\[0\]/],
    [{ args: [1, 0n], after: 5 }, /Invalid after: expected/],
  ];
  for (const [config, message] of bad) {
    // Was a CudaError here (no driver: the default stream could not be
    // made), and a stream made for nothing on a GPU.
    assert.throws(
      () => kernel.launch({ grid: 1, block: 1, ...config } as never),
      (error: Error) => error instanceof TypeError || error instanceof RangeError,
      Deno.inspect(config),
    );
    assert.throws(() => kernel.launch({ grid: 1, block: 1, ...config } as never), message);
  }
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.polluted = 1;
  try {
    // Was 'Invalid config option "polluted"' for every launch.
    assert.throws(
      () => kernel.launch({ grid: 1, block: 1, args: null } as never),
      /Invalid args: expected an array/,
    );
  } finally {
    delete prototype.polluted;
  }
  // Nor does an inherited value stand in for a missing one.
  prototype.grid = 1;
  prototype.args = [1, 0n];
  try {
    assert.throws(
      () => kernel.launch({ block: 1, args: null } as never),
      /Invalid grid/,
    );
    assert.throws(() => kernel.launch({ grid: 1, block: 1 } as never), /Invalid args/);
  } finally {
    delete prototype.grid;
    delete prototype.args;
  }
});

Deno.test("loadModule() reads only its options' own device: an inherited one is no option", async () => {
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.device = "bogus";
  try {
    let thrown: unknown;
    try {
      // cuda:0, the default: loads on a GPU, refuses where there is none.
      (await loadModule(".version 7.0\n.target sm_75\n.address_size 64\n", {})).dispose();
    } catch (error) {
      thrown = error;
    }
    // Was 'Invalid device "bogus"' (the inherited value read as the option).
    assert.ok(!(thrown instanceof Error && /bogus/.test(thrown.message)), String(thrown));
  } finally {
    delete prototype.device;
  }
});
