/**
 * GPU benchmark: `startCopy` against per-tensor FFI copies, in one run.
 *
 * Cases: the reference batch (16 and 64 samples) CPU→GPU, 1000 × 4 KB
 * float32, 32 × 8 MB pageable float32, and the reference batch GPU→CPU.
 * Methods: (a) naive per tensor (device allocation + synchronous copy),
 * (b) the best hand-written FFI loop (async copies into preallocated device
 * memory, one wait), (c) `startCopy` + `await get()` with default options
 * and with `useBackgroundThread: false`, and (f) the physical floor: one
 * pinned DMA of the same number of bytes through the same shim, plus the
 * wait for its completion event. Every row also shows its multiple of the
 * floor. Further cases: the reference batch built in a `hostArena`, the
 * reference batch copied into the last result (`into`, from the arena and
 * from ordinary memory), and a batch of 100,000 tiny tensors (time per
 * tensor printed).
 *
 * Prints a table last, writes bench/results.json and bench/results.svg.
 * Run: `deno task bench:gpu` (needs a GPU). It measures the shim that loads
 * (the prebuilt product by default; `MTC_SHIM_PATH` picks another) and
 * prints which. Allocations per iteration are the pools' allocations.
 *
 * @module
 */

import { freezeContainers } from "../examples/freeze_containers.ts";
import { copyAsync, copyFromBuffer, deviceAlloc, deviceFree, gather } from "../ffi/native.ts";
import { eventStatus } from "../ffi/events.ts";
import { streamSynchronize } from "../ffi/streams.ts";
import { shimInfo } from "../ffi/library.ts";
import { testAids } from "../ffi/test_aids.ts";
import {
  deviceCount,
  disposeAll,
  hostArena,
  startCopy,
  type Tensor,
  type TypedArray,
} from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";
import { collectLeaves } from "../src/walk/collect_leaves.ts";
import { walk } from "../src/walk/walk.ts";
import { Route } from "../src/route.ts";
import { mirrorWalkCounts } from "../src/mirror_walk.ts";
import { packedWalkCounts } from "../src/packed_walk.ts";
import { resolveOptions } from "../src/options.ts";
import { pinnedBuffer, pinnedPool, pinnedView } from "../src/memory/pinned_memory.ts";
import { devicePool } from "../src/memory/device_memory.ts";
import { acquireEvent, releaseEvent } from "../src/memory/event_pool.ts";
import type { TypedArrayConstructor } from "../src/dtype.ts";
import { releaseIdleStagers } from "../src/memory/stager_pool.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device: the GPU benchmark needs one.");
  Deno.exit(0);
}
console.log(`shim: ${shimInfo().file?.path} (${shimInfo().file?.origin})`);

/** Allocations the library made so far (its pinned and device pools). */
function allocations(): number {
  return pinnedPool.stats().misses + devicePool(0).stats().misses;
}

const SMALL_ITERATIONS = Number(Deno.env.get("MTC_BENCH_ITERATIONS") ?? 1000);
const LARGE_ITERATIONS = 20;

interface Row {
  case: string;
  method: string;
  iterations: number;
  medianUs: number;
  p90Us: number;
  gbPerS: number;
  ratioVsNaive: number;
  allocsPerIteration: number;
  /** Median over the same case's floor (f). */
  xFloor?: number;
}

const FLOOR = "(f) floor: one pinned DMA + wait";

/**
 * (f) The physical floor of moving `bytes`: one copy between pinned host
 * memory and device memory through the same shim, then polling its event
 * (as `get()` does). Returns the body and a cleanup.
 */
function floorCopy(bytes: number, toDevice: boolean): { run: Body; free: () => void } {
  const host = pinnedPool.acquire(Math.max(bytes, 1));
  const device = devicePool(0).acquire(Math.max(bytes, 1));
  const event = acquireEvent(0);
  return {
    run: () => {
      copyAsync({
        device: 0,
        dst: toDevice ? device.address : host.address,
        src: toDevice ? host.address : device.address,
        bytes,
        event,
      });
      while (eventStatus(0, event) === -1) { /* poll, as get() does first */ }
    },
    free: () => {
      releaseEvent(0, event);
      pinnedPool.release(host);
      devicePool(0).release(device);
    },
  };
}

/**
 * A row of `data` copied into its last result (`into`) against `floor`;
 * `frozen`: the result's containers frozen too.
 */
async function intoCase(
  name: string,
  data: unknown,
  floor: { run: Body },
  frozen = false,
): Promise<void> {
  const result = await startCopy(data, "cuda:0").get();
  const previous = (frozen ? freezeContainers(result) : result) as object;
  await runCase(name, data, SMALL_ITERATIONS, [
    ["(c) startCopy({ into })", async () => {
      await startCopy(data, "cuda:0", { into: previous }).get();
    }],
    [FLOOR, floor.run],
  ]);
  disposeAll(previous);
}

function leavesOf(data: unknown): TypedArray[] {
  return collectLeaves(data).map((leaf) =>
    ArrayBuffer.isView(leaf) ? leaf : (leaf as Tensor).toTypedArray()
  );
}

function bytesOf(data: unknown): number {
  return collectLeaves(data).reduce((sum, leaf) => sum + leaf.byteLength, 0);
}

/** A timed body; what it returns runs after the clock stops (cleanup). */
type Body = () => Promise<(() => void) | void> | (() => void) | void;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function time(
  iterations: number,
  warmup: number,
  body: Body,
): Promise<{ median: number; p90: number; allocs: number }> {
  for (let i = 0; i < warmup; i++) (await body())?.();
  const samples: number[] = [];
  const before = allocations();
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    const cleanup = await body();
    samples.push((performance.now() - start) * 1000);
    cleanup?.();
  }
  const allocs = (allocations() - before) / iterations;
  samples.sort((a, b) => a - b);
  return { median: quantile(samples, 0.5), p90: quantile(samples, 0.9), allocs };
}

/** (a) A device allocation and a synchronous copy per tensor. */
function naiveToDevice(arrays: TypedArray[]): () => void {
  return () => {
    const addresses = arrays.map((array) => {
      const address = deviceAlloc(0, Math.max(array.byteLength, 1));
      copyFromBuffer({ device: 0, dst: address, src: array });
      streamSynchronize(0);
      return address;
    });
    for (const address of addresses) deviceFree(0, address);
  };
}

/** (b) Async copies into preallocated device memory, one wait. */
function handWrittenToDevice(arrays: TypedArray[]): { run: () => void; free: () => void } {
  const addresses = arrays.map((array) => deviceAlloc(0, Math.max(array.byteLength, 1)));
  return {
    run: () => {
      for (let i = 0; i < arrays.length; i++) {
        copyFromBuffer({ device: 0, dst: addresses[i], src: arrays[i] });
      }
      streamSynchronize(0);
    },
    free: () => addresses.forEach((address) => deviceFree(0, address)),
  };
}

function withStartCopy(data: unknown, device: string, background: boolean): Body {
  return async () => {
    const result = await startCopy(data, device, { useBackgroundThread: background }).get();
    return () => disposeAll(result);
  };
}

const rows: Row[] = [];
async function runCase(
  name: string,
  data: unknown,
  iterations: number,
  methods: [string, Body][],
): Promise<void> {
  const bytes = bytesOf(data);
  const warmup = Math.max(3, Math.floor(iterations / 10));
  let naive = NaN;
  const first = rows.length;
  for (const [method, body] of methods) {
    const { median, p90, allocs } = await time(iterations, warmup, body);
    if (Number.isNaN(naive)) naive = median;
    rows.push({
      case: name,
      method,
      iterations,
      medianUs: median,
      p90Us: p90,
      gbPerS: bytes / (median * 1e3),
      ratioVsNaive: naive / median,
      allocsPerIteration: allocs,
    });
    console.log(`${name} / ${method}: median ${median.toFixed(1)} µs, p90 ${p90.toFixed(1)} µs`);
  }
  const floor = rows.slice(first).find((r) => r.method === FLOOR);
  if (floor) { for (const r of rows.slice(first)) r.xFloor = r.medianUs / floor.medianUs; }
}

async function hostToDeviceCase(name: string, data: unknown, iterations: number): Promise<void> {
  const arrays = leavesOf(data);
  const hand = handWrittenToDevice(arrays);
  const floor = floorCopy(bytesOf(data), true);
  await runCase(name, data, iterations, [
    ["(a) naive per tensor", naiveToDevice(arrays)],
    ["(b) hand-written FFI loop", hand.run],
    ["(c) startCopy", withStartCopy(data, "cuda:0", true)],
    ["(c) startCopy, no background", withStartCopy(data, "cuda:0", false)],
    [FLOOR, floor.run],
  ]);
  hand.free();
  floor.free();
}

const ref16 = createBatchMetaData(16);
const ref64 = createBatchMetaData(64, 2);
const small4k = Array.from({ length: 1000 }, (_, i) => new Float32Array(1024).fill(i));
const large8m = Array.from({ length: 32 }, (_, i) => new Float32Array(2 * 1024 * 1024).fill(i));

// Where the time goes for one small copy (reference batch, 16 samples).
// Each phase is timed in a loop of its own (so that each runs as it does in
// a loop of copies, warm and with the walk's compiled plan), with the
// library's own pieces, in the order startCopy runs them; "startCopy()
// returns" and "get() resolves" are the real call.
const breakdown: Record<string, number> = {};
{
  const phases: Record<string, number[]> = {
    "walk (structure only)": [],
    "walk + output tensors (startCopy's sink)": [],
    "pack 528 tensors into pinned memory (typed set)": [],
    "one FFI copy + event record": [],
    "startCopy() returns": [],
    "get() resolves after that": [],
    "disposeAll(result) (not in the targets)": [],
  };
  const sources = collectLeaves(ref16).map((leaf) => (leaf as Tensor).toTypedArray());
  const stage = pinnedPool.acquire(256 * 1024);
  const devicePoolBlock = devicePool(0).acquire(256 * 1024);
  const event = acquireEvent(0);
  const identity = { add: (leaf: unknown) => leaf };
  const timed = async (names: string[], body: () => Promise<number[]> | number[]) => {
    for (let i = 0; i < SMALL_ITERATIONS + 100; i++) {
      const values = await body();
      if (i >= 100) names.forEach((name, k) => phases[name].push(values[k] * 1000));
    }
  };
  await timed(["walk (structure only)"], () => {
    const t0 = performance.now();
    walk(ref16, identity);
    return [performance.now() - t0];
  });
  await timed(["walk + output tensors (startCopy's sink)"], () => {
    const route = new Route(0, resolveOptions(undefined));
    const t0 = performance.now();
    walk(ref16, route);
    const t1 = performance.now();
    route.releaseLists();
    return [t1 - t0];
  });
  let packed = 0;
  await timed(["pack 528 tensors into pinned memory (typed set)"], () => {
    const t0 = performance.now();
    let offset = 0;
    for (const src of sources) {
      const view = pinnedView(stage, src.constructor as TypedArrayConstructor);
      const size = src.byteLength;
      view.set(src as never, offset / (src as Float32Array).BYTES_PER_ELEMENT);
      offset += size + ((16 - (size % 16)) % 16);
    }
    packed = offset;
    return [performance.now() - t0];
  });
  await timed(["one FFI copy + event record"], () => {
    const t0 = performance.now();
    copyAsync({
      device: 0,
      dst: devicePoolBlock.address,
      src: stage.address,
      bytes: packed,
      event,
    });
    const t1 = performance.now();
    streamSynchronize(0);
    return [t1 - t0];
  });
  await timed(
    ["startCopy() returns", "get() resolves after that", "disposeAll(result) (not in the targets)"],
    async () => {
      const t0 = performance.now();
      const handle = startCopy(ref16, "cuda:0");
      const t1 = performance.now();
      const result = await handle.get();
      const t2 = performance.now();
      disposeAll(result);
      return [t1 - t0, t2 - t1, performance.now() - t2];
    },
  );
  releaseEvent(0, event);
  pinnedPool.release(stage);
  devicePool(0).release(devicePoolBlock);
  console.log("breakdown of one copy of the 16-sample reference batch (median µs):");
  for (const [phase, samples] of Object.entries(phases)) {
    samples.sort((a, b) => a - b);
    breakdown[phase] = quantile(samples, 0.5);
    console.log(`  ${phase}: ${breakdown[phase].toFixed(1)}`);
  }
}

await hostToDeviceCase("ref batch 16 H2D", ref16, SMALL_ITERATIONS);
{
  const arena = hostArena(1 << 20);
  const inArena = createBatchMetaData(16, 1, arena); // the same batch, in pinned memory
  const floor = floorCopy(bytesOf(ref16), true);
  await runCase("ref batch 16 H2D from a hostArena", inArena, SMALL_ITERATIONS, [
    ["(c) startCopy", withStartCopy(inArena, "cuda:0", true)],
    [FLOOR, floor.run],
  ]);
  // The opt-in reuse path: the same batch copied into the last result, in place.
  await intoCase("ref batch 16 H2D from a hostArena, into the last result", inArena, floor);
  // The same with the batch's and the result's containers frozen: the
  // frozen path reads neither structure again (src/transfer/into/frozen.ts).
  const frozenArena = hostArena(1 << 20);
  await intoCase(
    "ref batch 16 H2D from a hostArena, frozen, into the last result",
    freezeContainers(createBatchMetaData(16, 1, frozenArena)),
    floor,
    true,
  );
  frozenArena.dispose();
  floor.free();
  arena.dispose();
}
{
  const floor = floorCopy(bytesOf(ref16), true);
  await intoCase("ref batch 16 H2D, into the last result", ref16, floor);
  floor.free();
}
await hostToDeviceCase("ref batch 64 H2D", ref64, SMALL_ITERATIONS);
await hostToDeviceCase("1000 x 4 KB H2D", small4k, SMALL_ITERATIONS);
await hostToDeviceCase("32 x 8 MB pageable H2D", large8m, LARGE_ITERATIONS);
{
  // How long startCopy() takes to return while the background stages.
  const returns: number[] = [];
  for (let i = 0; i < LARGE_ITERATIONS + 3; i++) {
    const start = performance.now();
    const handle = startCopy(large8m, "cuda:0");
    const returned = performance.now();
    disposeAll(await handle.get());
    if (i >= 3) returns.push((returned - start) * 1000);
  }
  returns.sort((a, b) => a - b);
  breakdown["32 x 8 MB: startCopy() returns (µs)"] = quantile(returns, 0.5);
  console.log(
    `32 x 8 MB pageable: startCopy() returns after ${
      quantile(returns, 0.5).toFixed(1)
    } µs (median)`,
  );
}
{
  const tiny = Array.from({ length: 100_000 }, (_, i) => new Float32Array([i, -i]));
  const floor = floorCopy(bytesOf(tiny), true);
  await runCase("100000 tiny tensors H2D", tiny, 20, [
    ["(c) startCopy", withStartCopy(tiny, "cuda:0", true)],
    [FLOOR, floor.run],
  ]);
  floor.free();
  const median = rows[rows.length - 2].medianUs;
  breakdown["100000 tiny tensors: ns per tensor"] = (median * 1000) / 100_000;
  breakdown["packed walks so far (all H2D rows)"] = packedWalkCounts().packed;
  console.log(`100000 tiny tensors: ${((median * 1000) / 100_000).toFixed(1)} ns per tensor`);
}

{
  const onDevice = await startCopy(ref16, "cuda:0").get();
  const sources = collectLeaves(onDevice) as Tensor[];
  const ptrAddress = (t: Tensor): number =>
    t.ptr === null ? 0 : Number(Deno.UnsafePointer.value(t.ptr));
  const landing = pinnedPool.acquire(256 * 1024);
  const d2hFloor = floorCopy(bytesOf(ref16), false);
  // Whether the copies back were taken during their walks (mirror_walk.ts).
  const mirrorBefore = mirrorWalkCounts();
  await runCase("ref batch 16 D2H", onDevice, SMALL_ITERATIONS, [
    // A synchronous copy per tensor into pinned memory (the product shim
    // has no pageable device-to-host copy; pinned is the faster of the two).
    ["(a) naive per tensor", () => {
      for (const t of sources) {
        copyAsync({ device: 0, dst: landing.address, src: ptrAddress(t), bytes: t.byteLength });
        streamSynchronize(0);
      }
    }],
    ["(c) startCopy", withStartCopy(onDevice, "cpu", true)],
    ["(c) startCopy, no background", withStartCopy(onDevice, "cpu", false)],
    [FLOOR, d2hFloor.run],
  ]);
  d2hFloor.free();
  const mirrorAfter = mirrorWalkCounts();
  breakdown["D2H: copies back walked as one run"] = mirrorAfter.taken - mirrorBefore.taken;
  breakdown["D2H: copies back handed over"] = mirrorAfter.handedOver - mirrorBefore.handedOver;

  pinnedPool.release(landing);

  // The device-side gather of those 528 tensors plus the one device-to-host
  // copy, timed alone: the library's kernel, and (with the test aids) the
  // copy-engine path it falls back to where the driver cannot load it.
  const table = pinnedPool.acquire(sources.length * 24);
  const entries = pinnedView(table, Float64Array) as Float64Array;
  let end = 0;
  sources.forEach((t, m) => {
    const offset = Math.ceil(end / 16) * 16;
    entries.set([ptrAddress(t), offset, t.byteLength], 3 * m);
    end = offset + t.byteLength;
  });
  const scratch = devicePool(0).acquire(end);
  const hostChunk = pinnedPool.acquire(end);
  const event = acquireEvent(0);
  const wait = (): void => {
    while (eventStatus(0, event) === -1) { /* spin */ }
  };
  const gatherOnce = (): void => {
    gather({
      device: 0,
      table: table.address,
      count: sources.length,
      dst: scratch.address,
      hostDst: hostChunk.address,
      bytes: end,
      event,
    });
    wait();
  };
  const methods: [string, Body][] = [["gather kernel + 1 copy", gatherOnce]];
  if (testAids) {
    methods.push(["copy-engine fallback + 1 copy", () => {
      testAids!.disableKernels(true);
      gatherOnce();
      testAids!.disableKernels(false);
    }]);
  }
  await runCase("ref batch 16 D2H gather only", onDevice, SMALL_ITERATIONS, methods);
  if (testAids) {
    gatherOnce();
    const check = new Uint8Array(pinnedBuffer(hostChunk), 0, end).slice();
    testAids.disableKernels(true);
    gatherOnce();
    testAids.disableKernels(false);
    const same = new Uint8Array(pinnedBuffer(hostChunk), 0, end).every((b, i) => b === check[i]);
    console.log(`the kernel and the copy-engine fallback gathered the same bytes: ${same}`);
  }
  releaseEvent(0, event);
  pinnedPool.release(table);
  pinnedPool.release(hostChunk);
  devicePool(0).release(scratch);
  disposeAll(onDevice);
}
releaseIdleStagers();

const header = "| case | method | median µs | p90 µs | GB/s | vs (a) | x floor | allocs/iter |";
console.log(`\n${header}\n|---|---|---|---|---|---|---|---|`);
for (const r of rows) {
  console.log(
    `| ${r.case} | ${r.method} | ${r.medianUs.toFixed(1)} | ${r.p90Us.toFixed(1)} | ${
      r.gbPerS.toFixed(2)
    } | ${r.ratioVsNaive.toFixed(1)}x | ${r.xFloor?.toFixed(1) ?? "-"} | ${
      r.allocsPerIteration.toFixed(2)
    } |`,
  );
}
console.log("\nbreakdown and extra figures:");
for (const [k, v] of Object.entries(breakdown)) console.log(`  ${k}: ${v.toFixed(1)}`);

const out = new URL("./", import.meta.url);
const outDir = Deno.env.get("MTC_BENCH_OUT");
const target = (name: string): string | URL => outDir ? `${outDir}/${name}` : new URL(name, out);
await Deno.writeTextFile(
  target("results.json"),
  JSON.stringify({ date: new Date().toISOString(), breakdown, rows }, null, 2),
);
await Deno.writeTextFile(target("results.svg"), svgChart(rows));

/** A horizontal log-scale bar chart of the medians, grouped by case. */
function svgChart(data: Row[]): string {
  const barHeight = 16;
  const left = 420;
  const width = 980;
  const colors: Record<string, string> = {
    "(a) naive per tensor": "#c0392b",
    "(b) hand-written FFI loop": "#e67e22",
    "(c) startCopy": "#27ae60",
    "(c) startCopy, no background": "#2980b9",
    [FLOOR]: "#7f8c8d",
  };
  const max = Math.max(...data.map((r) => r.medianUs));
  const scale = (us: number): number =>
    (Math.log10(Math.max(us, 1)) / Math.log10(max * 1.2)) * (width - left - 80);
  let y = 40;
  const parts: string[] = [];
  let lastCase = "";
  for (const r of data) {
    if (r.case !== lastCase) {
      y += 12;
      parts.push(`<text x="10" y="${y + 12}" font-weight="bold">${r.case}</text>`);
      y += 18;
      lastCase = r.case;
    }
    parts.push(`<text x="30" y="${y + 12}" font-size="12">${r.method}</text>`);
    parts.push(
      `<rect x="${left}" y="${y}" width="${scale(r.medianUs).toFixed(1)}" height="${
        barHeight - 3
      }" fill="${colors[r.method] ?? "#777"}"/>`,
    );
    parts.push(
      `<text x="${left + scale(r.medianUs) + 6}" y="${y + 12}" font-size="12">${
        r.medianUs.toFixed(1)
      } µs</text>`,
    );
    y += barHeight;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${
    y + 20
  }" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="24" font-size="16">@mtc/core GPU benchmark: median time per copy (log scale, shorter is better)</text>
${parts.join("\n")}
</svg>
`;
}
