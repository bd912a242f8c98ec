import assert from "node:assert/strict";
import { Tensor } from "../mod.ts";
import { ARRAY_CLASSES, arrayCodeOf, CODE_BYTES, CODE_DTYPE } from "../src/array_code.ts";
import { resolveOptions } from "../src/options.ts";
import { Route } from "../src/route.ts";
import { tensorInternals } from "../src/tensor.ts";
import { TensorLayout, vectorLayout, vectorLayouts } from "../src/tensor_layout.ts";
import { walk } from "../src/walk/walk.ts";

const CPU = -1;
const CUDA0 = 0;
const CUDA1 = 1;

Deno.test("a layout on another device keeps dtype, shape and size, and is made once per device", () => {
  const shape = Object.freeze([2, 3]);
  const cpu = new TensorLayout("int16", shape, 12, CPU);
  assert.equal(cpu.on(CPU), cpu);
  const cuda0 = cpu.on(CUDA0);
  assert.deepEqual(
    [cuda0.dtype, cuda0.shape, cuda0.byteLength, cuda0.device, cuda0.deviceName, cuda0.numel],
    ["int16", shape, 12, CUDA0, "cuda:0", 6],
  );
  assert.equal(cpu.on(CUDA0), cuda0);
  assert.equal(cpu.on(CUDA1).deviceName, "cuda:1");
  assert.notEqual(cpu.on(CUDA1), cuda0);
  // Back to the CPU from the device's layout: a layout of its own, right all the same.
  assert.equal(cuda0.on(CPU).deviceName, "cpu");
  assert.equal(cuda0.on(CPU).shape, shape);
});

Deno.test("vector layouts describe every class at short and long lengths, one per (device, class, length)", () => {
  for (const device of [CPU, CUDA0, CUDA1]) {
    const table = vectorLayouts(device);
    assert.equal(vectorLayouts(device), table);
    for (let code = 0; code < ARRAY_CLASSES.length; code++) {
      // Below, at and past the end of the short table (4096), and far past it.
      for (const length of [0, 1, 4095, 4096, 100_000]) {
        const layout = vectorLayout(table, code, length, device);
        assert.equal(layout.dtype, CODE_DTYPE[code]);
        assert.deepEqual(layout.shape, [length]);
        assert.ok(Object.isFrozen(layout.shape));
        assert.equal(layout.byteLength, length * CODE_BYTES[code]);
        assert.equal(layout.device, device);
        assert.equal(vectorLayout(table, code, length, device), layout);
      }
    }
  }
  // Distinct devices and classes never share one.
  const int32 = arrayCodeOf(new Int32Array(1));
  const float32 = arrayCodeOf(new Float32Array(1));
  assert.notEqual(
    vectorLayout(vectorLayouts(CUDA0), int32, 5, CUDA0),
    vectorLayout(vectorLayouts(CUDA1), int32, 5, CUDA1),
  );
  assert.notEqual(
    vectorLayout(vectorLayouts(CUDA0), int32, 5, CUDA0),
    vectorLayout(vectorLayouts(CUDA0), float32, 5, CUDA0),
  );
});

Deno.test("long vector layouts are kept up to a bound, and are right past it", () => {
  const table = vectorLayouts(CUDA0);
  const code = arrayCodeOf(new Uint8Array(1));
  // Far more distinct long lengths than are kept: each is still right.
  for (let length = 10_000; length < 10_000 + 6000; length++) {
    const layout = vectorLayout(table, code, length, CUDA0);
    assert.equal(layout.byteLength, length);
    assert.deepEqual(layout.shape, [length]);
  }
});

Deno.test("a route's outputs share the layouts of their kind: one per length for TypedArray leaves, the input's on the target for tensors", () => {
  const route = new Route(CUDA0, resolveOptions(undefined));
  const boxes = Tensor.from(new Float32Array(8), [2, 4]);
  const out = walk(
    [new Float32Array(3), new Float32Array(3), new Float32Array(4), boxes, boxes],
    route,
  ) as Tensor[];
  const layout = (tensor: Tensor) => tensorInternals.layout(tensor);
  assert.equal(layout(out[0]), layout(out[1]));
  assert.notEqual(layout(out[0]), layout(out[2]));
  assert.equal(layout(out[3]), layout(boxes).on(CUDA0));
  assert.equal(layout(out[3]), layout(out[4]));
  assert.deepEqual(out.map((t) => [t.dtype, t.shape, t.device]), [
    ["float32", [3], "cuda:0"],
    ["float32", [3], "cuda:0"],
    ["float32", [4], "cuda:0"],
    ["float32", [2, 4], "cuda:0"],
    ["float32", [2, 4], "cuda:0"],
  ]);
  route.end();
  route.releaseLists();
});
