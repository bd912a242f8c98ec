/**
 * Helpers for GPU tests: reading device bytes back (with the test aid's
 * plain synchronous copy where it is loaded, independent of the code under
 * test; else through startCopy), and building inputs.
 */

import { testAids } from "../../ffi/test_aids.ts";
import assert from "node:assert/strict";
import {
  type AsyncCopyHandle,
  deviceCount,
  disposeAll,
  type HostArena,
  setMemoryLimits,
  startCopy,
  Tensor,
  type TypedArray,
} from "../../mod.ts";
import { devicePool } from "../../src/memory/device_memory.ts";
import { random } from "../../examples/reference_batch.ts";

/**
 * True where GPU tests can run: a GPU, and the test-aid build loaded (as
 * `deno task test` does), since the tests read device bytes back with it.
 */
export const hasGpu: boolean = deviceCount() > 0 && testAids !== undefined;

/** Whether the tests run under compute-sanitizer (tests/sanitize.sh sets it). */
export const underSanitizer: boolean = Deno.env.get("MTC_UNDER_SANITIZER") === "1";

/** The bytes of a tensor wherever it lives (device tensors are read back). */
export function bytesOf(value: Tensor | TypedArray): Uint8Array {
  if (ArrayBuffer.isView(value)) {
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength).slice();
  }
  if (value.device === "cpu") {
    const data = value.toTypedArray();
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
  }
  const out = new Uint8Array(value.byteLength);
  const device = Number(value.device.slice(5));
  const address = value.ptr === null ? 0 : Number(Deno.UnsafePointer.value(value.ptr));
  if (!testAids) throw new Error("reading device bytes back needs the test aids (deno task test)");
  testAids.copyToBuffer({ device, dst: out, src: address });
  return out;
}

/** The device address `tensor.ptr` points at (0 for null). */
export function ptrAddress(tensor: Tensor): number {
  return tensor.ptr === null ? 0 : Number(Deno.UnsafePointer.value(tensor.ptr));
}

/** Random bytes (every bit pattern, NaN payloads included) in an array of `cls`. */
export function randomArray<T extends TypedArray>(
  cls: {
    new (buffer: ArrayBuffer, offset?: number, length?: number): T;
    BYTES_PER_ELEMENT: number;
  },
  length: number,
  seed: number,
): T {
  const rand = random(seed);
  const bytes = new Uint8Array(length * cls.BYTES_PER_ELEMENT);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rand() * 256);
  return new cls(bytes.buffer, 0, length);
}

/** One array of every TypedArray class, of varied small lengths (zero included). */
export function everyDtype(seed: number): Record<string, TypedArray> {
  return {
    float16: randomArray(Float16Array, 7, seed + 1),
    float32: randomArray(Float32Array, 33, seed + 2),
    float64: randomArray(Float64Array, 5, seed + 3),
    int8: randomArray(Int8Array, 3, seed + 4),
    int16: randomArray(Int16Array, 9, seed + 5),
    int32: randomArray(Int32Array, 0, seed + 6),
    int64: randomArray(BigInt64Array, 4, seed + 7),
    uint8: randomArray(Uint8Array, 1, seed + 8),
    clamped: randomArray(Uint8ClampedArray, 6, seed + 9),
    uint16: randomArray(Uint16Array, 11, seed + 10),
    uint32: randomArray(Uint32Array, 13, seed + 11),
    uint64: randomArray(BigUint64Array, 2, seed + 12),
    // A view into the middle of a larger buffer.
    view: randomArray(Float32Array, 64, seed + 13).subarray(3, 17),
  };
}

/** The tensor leaves of a nested structure, in walk order. */
export function flatten(value: unknown, into: (Tensor | ArrayBufferView)[] = []): typeof into {
  if (value instanceof Tensor || ArrayBuffer.isView(value)) into.push(value);
  else if (Array.isArray(value)) value.forEach((v) => flatten(v, into));
  else if (value instanceof Map) [...value.values()].forEach((v) => flatten(v, into));
  else if (value && typeof value === "object") {
    Object.values(value).forEach((v) => flatten(v, into));
  }
  return into;
}

/** Asserts that `output` holds `input`'s leaves, bit for bit, as tensors on `device`. */
export function assertRoundTrip(input: unknown, output: unknown, device: string): void {
  const sources = flatten(input);
  const results = flatten(output);
  assert.equal(results.length, sources.length);
  results.forEach((result, i) => {
    assert.ok(result instanceof Tensor);
    assert.equal(result.device, device);
    assert.deepEqual(bytesOf(result), bytesOf(sources[i] as Tensor), `leaf ${i}`);
  });
}

/** How long the ordering tests hold a stream back (µs): long enough that a CPU wait would show. */
export const HOLD_US = 300_000;

/** The PTX of examples/step_kernels.ptx (the kernels the ordering tests launch). */
export function stepKernelsPtx(): Promise<string> {
  return Deno.readTextFile(new URL("../../examples/step_kernels.ptx", import.meta.url));
}

/**
 * A copy of 2 MiB to cuda:0 started under a device limit 1 MiB above what
 * is in use: it can never fit, and fails ("memory limit"). The limits are
 * put back before it returns.
 */
export function copyThatCannotFit(): AsyncCopyHandle<unknown> {
  const before = setMemoryLimits({});
  try {
    setMemoryLimits({ deviceBytes: devicePool(0).inUseBytes + 1024 * 1024 });
    return startCopy([new Uint8Array(2 * 1024 * 1024)], "cuda:0");
  } finally {
    setMemoryLimits(before);
  }
}

/**
 * Every output of `result` as plain values (dtype, shape, device, whether
 * pinned, and its bytes, device bytes read back by the test aid), for
 * comparing the results of two paths with `deepEqual`.
 */
export function plainValues(result: unknown): unknown {
  if (result instanceof Tensor) {
    return {
      dtype: result.dtype,
      shape: result.shape,
      device: result.device,
      pinned: result.pinned,
      bytes: [...bytesOf(result)],
    };
  }
  if (Array.isArray(result)) return result.map(plainValues);
  if (result instanceof Map) return new Map([...result].map(([k, v]) => [k, plainValues(v)]));
  if (result !== null && typeof result === "object") {
    return Object.fromEntries(Object.entries(result).map(([k, v]) => [k, plainValues(v)]));
  }
  return result;
}

/**
 * Starts `back` (a copy to the CPU) behind a long copy (the rest of a
 * pinned arena, ~5 ms for 256 MiB on the copy stream), disposes its
 * outputs at once (through `outputs()`), and copies `mine` (through pinned
 * staging the CPU writes now) to the device and back. Had the outputs'
 * pinned blocks gone back to the pool when disposed, the next copy's
 * staging could get one, and the late DMA of `back` would overwrite it
 * before that copy sent it. Returns what `mine` became after the round trip.
 */
export async function disposeBackEarly(
  arena: HostArena,
  back: () => AsyncCopyHandle<unknown>,
  mine: TypedArray[],
): Promise<TypedArray[]> {
  const ahead = startCopy([arena.uint8(arena.byteLength - arena.usedBytes)], "cuda:0");
  const handle = back();
  disposeAll(handle.outputs());
  const up = await startCopy(mine, "cuda:0", { useBackgroundThread: false }).get();
  disposeAll(await ahead.get());
  await handle.get();
  arena.reset();
  const landed = await startCopy(up, "cpu").get();
  const copies = landed.map((tensor) => tensor.toTypedArray().slice());
  disposeAll([up, landed]);
  return copies;
}
