import assert from "node:assert/strict";
import { loadModule } from "../../mod.ts";

// The checks of loadModule() that run before any CUDA call (gpu_api_test.ts
// has the empty and non-binary images, and an inherited device). Loading,
// kernel() and dispose() are specified on a GPU in tests/gpu/kernels_test.ts.

const PTX = ".version 7.0\n.target sm_75\n.address_size 64\n";

Deno.test("loadModule: the image's error names what it got", () => {
  assert.throws(() => loadModule(""), {
    name: "TypeError",
    message:
      "Invalid image: expected PTX text or a non-empty Uint8Array (cubin, fat binary, PTX), got an empty string",
  });
  assert.throws(() => loadModule(new Uint8Array(0)), {
    name: "TypeError",
    message: /, got Uint8Array$/,
  });
  assert.throws(() => loadModule(null as never), { name: "TypeError", message: /, got null$/ });
});

Deno.test("loadModule: options must be an object with no option but device", () => {
  assert.throws(() => loadModule(PTX, 5 as never), {
    name: "TypeError",
    message: "Invalid options: expected an object, got 5",
  });
  assert.throws(() => loadModule(PTX, null as never), {
    name: "TypeError",
    message: "Invalid options: expected an object, got null",
  });
  assert.throws(() => loadModule(PTX, { device: "cuda:0", jit: true } as never), {
    name: "TypeError",
    message: 'Invalid option "jit": expected device',
  });
});

Deno.test("loadModule: the CPU is no device to load a module on, synchronously", () => {
  assert.throws(() => loadModule(PTX, { device: "cpu" }), {
    name: "TypeError",
    message: 'Invalid device "cpu": expected "cuda" or "cuda:N"',
  });
});
