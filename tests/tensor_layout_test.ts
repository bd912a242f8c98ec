import assert from "node:assert/strict";
import { Tensor } from "../mod.ts";
import { ARRAY_CLASSES, arrayCodeOf, CODE_BYTES, CODE_DTYPE } from "../src/array_code.ts";
import { resolveOptions } from "../src/options.ts";
import { Route } from "../src/route.ts";
import { tensorInternals } from "../src/tensor.ts";
import {
  cpuLayout,
  keptLayouts,
  TensorLayout,
  vectorLayout,
  vectorLayouts,
} from "../src/tensor_layout.ts";
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
  // Back to the CPU from the device's layout: the layout it came from.
  assert.equal(cuda0.on(CPU), cpu);
  assert.equal(cuda0.on(CUDA1), cpu.on(CUDA1));
  assert.equal(cpu.on(CUDA1).on(CUDA0), cuda0);
});

Deno.test("a tensor moved back and forth keeps to one layout per device (no chain of layouts per round trip)", () => {
  const cpu = new TensorLayout("float32", Object.freeze([3]), 12, CPU);
  const seen = new Set<TensorLayout>();
  let layout = cpu;
  for (let round = 0; round < 1000; round++) {
    for (const device of [CUDA0, CPU, CUDA1, CUDA0, CUDA1, CPU]) {
      layout = layout.on(device);
      seen.add(layout);
    }
  }
  assert.equal(seen.size, 3);
  assert.equal(layout, cpu);
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
  assert.equal(keptLayouts().longVectors, 4096);
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

Deno.test("Tensor.from shares the layouts of the usual meta-data shapes, and its copies find theirs made", () => {
  const a = Tensor.from(new Float32Array(8), [2, 4]);
  const b = Tensor.from(new Float32Array(8), [2, 4]);
  const layout = (tensor: Tensor) => tensorInternals.layout(tensor);
  assert.equal(layout(a), layout(b));
  assert.equal(layout(Tensor.from(new Uint8Array(5))), layout(Tensor.from(new Uint8Array(5))));
  // Another dtype over the same class, another shape of the same size: their own.
  assert.notEqual(
    layout(Tensor.from(new Uint8Array(8), [8], "bool")),
    layout(Tensor.from(new Uint8Array(8))),
  );
  assert.notEqual(layout(Tensor.from(new Float32Array(8), [4, 2])), layout(a));
  assert.notEqual(layout(Tensor.from(new Float32Array(8), [8])), layout(a));
  // Outputs of copies of either share one layout on the target.
  const route = new Route(CUDA0, resolveOptions(undefined));
  const [x, y] = walk([a, b], route) as Tensor[];
  assert.equal(layout(x), layout(y));
  assert.equal(layout(x), layout(a).on(CUDA0));
  route.end();
  route.releaseLists();
  // Shapes outside the shared ones: right, each its own.
  for (const dims of [[2, 2, 2], [1, 8], [8, 1], [4096, 1], [1, 4096]]) {
    const data = new Float32Array(dims.reduce((p, d) => p * d, 1));
    const t = Tensor.from(data, dims);
    assert.deepEqual([t.shape, t.byteLength, t.numel], [dims, data.byteLength, data.length]);
    assert.ok(Object.isFrozen(t.shape));
  }
});

Deno.test("cpuLayout keeps a bounded number of layouts, and is right past the bound", () => {
  // More distinct [n, k] shapes than are kept (65,536), over every kept row count and width.
  let made = 0;
  for (let k = 1; k <= 16; k++) {
    for (let n = 0; n < 1024; n++) {
      for (const dtype of ["int8", "uint8", "int16", "uint16", "int32"] as const) {
        const layout = cpuLayout(dtype, [n, k], n * k * DTYPE_BYTES[dtype]);
        assert.deepEqual([layout.dtype, layout.shape, layout.byteLength], [
          dtype,
          [n, k],
          n * k * DTYPE_BYTES[dtype],
        ]);
        made++;
      }
    }
  }
  assert.ok(made > 65_536);
  assert.equal(keptLayouts().cpu, 65_536);
});

const DTYPE_BYTES = { int8: 1, uint8: 1, int16: 2, uint16: 2, int32: 4 } as const;
