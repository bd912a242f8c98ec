/**
 * Soak: many round trips of the reference batch (CPU → cuda:0 → CPU,
 * outputs disposed), sampling the process's resident memory and the pools'
 * bytes as it goes; then the same with the results dropped (not disposed),
 * under limits of 64 MiB per pool, where only the limits and the finalizers
 * bound memory. Prints one line per sample and a verdict; exits 1 when
 * memory grew after warm-up or a pool went over its limit.
 *
 * Run: `deno run --allow-ffi --allow-read --allow-env --v8-flags=--expose-gc bench/soak.ts [round trips]`
 * (needs a GPU; default 100000).
 *
 * @module
 */

import { deviceCount, disposeAll, memoryStats, setMemoryLimits, startCopy } from "../mod.ts";
import { createBatchMetaData } from "../examples/reference_batch.ts";
import { devicePool } from "../src/memory/device_memory.ts";
import { pinnedPool } from "../src/memory/pinned_memory.ts";

if (deviceCount() === 0) {
  console.log("No CUDA device: the soak needs one.");
  Deno.exit(0);
}
const total = Number(Deno.args[0] ?? 100_000);
const every = Math.max(1, Math.floor(total / 10));
const gc = (globalThis as { gc?: () => void }).gc;
const batch = createBatchMetaData(16);
const MiB = 2 ** 20;

interface Sample {
  rss: number;
  pinned: number;
  device: number;
}

function sample(): Sample {
  gc?.();
  return {
    rss: Deno.memoryUsage().rss,
    pinned: pinnedPool.stats().reservedBytes,
    device: devicePool(0).stats().reservedBytes,
  };
}

function show(label: string, i: number, s: Sample, started: number): void {
  console.log(
    `${label} ${String(i).padStart(7)}: rss ${(s.rss / MiB).toFixed(1)} MiB, pinned pool ${
      (s.pinned / MiB).toFixed(2)
    } MiB, device pool ${(s.device / MiB).toFixed(2)} MiB, ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s`,
  );
}

async function soak(label: string, dispose: boolean): Promise<{ first: Sample; last: Sample }> {
  const started = performance.now();
  let first: Sample | undefined;
  let last = sample();
  for (let i = 1; i <= total; i++) {
    const onDevice = await startCopy(batch, "cuda:0").get();
    const back = await startCopy(onDevice, "cpu").get();
    if (dispose) disposeAll([onDevice, back]);
    if (i % every === 0) {
      last = sample();
      first ??= last; // the first sample after warm-up (one tenth of the run)
      show(label, i, last, started);
    }
  }
  return { first: first ?? last, last };
}

const disposed = await soak("disposed", true);
const LIMIT = 64 * MiB;
setMemoryLimits({ pinnedBytes: LIMIT, deviceBytes: LIMIT });
const dropped = await soak("dropped ", false);
const stats = memoryStats();
const peaks = {
  pinned: stats.pinned.peakReservedBytes,
  device: stats.devices["cuda:0"].peakReservedBytes,
};
const grew = (a: Sample, b: Sample) => ({
  rss: b.rss - a.rss,
  pools: b.pinned - a.pinned + b.device - a.device,
});
const d = grew(disposed.first, disposed.last);
const r = grew(dropped.first, dropped.last);
console.log(
  `disposed: after warm-up RSS ${(d.rss / MiB).toFixed(2)} MiB, pools ${
    (d.pools / MiB).toFixed(2)
  } MiB; ` +
    `dropped: RSS ${(r.rss / MiB).toFixed(2)} MiB, pools ${(r.pools / MiB).toFixed(2)} MiB`,
);
console.log(
  `dropped: peak held pinned ${(peaks.pinned / MiB).toFixed(2)} MiB, device ${
    (peaks.device / MiB).toFixed(2)
  } MiB (limits ${LIMIT / MiB} MiB each; peaks include the disposed phase)`,
);
const flat = Math.abs(d.pools) <= MiB && d.rss <= 16 * MiB;
// Block rounding can put one admitted copy's blocks over the estimate.
const bounded = peaks.pinned <= LIMIT + 2 * MiB && peaks.device <= LIMIT + 2 * MiB;
console.log(flat && bounded ? "verdict: flat and bounded" : "verdict: GREW");
Deno.exit(flat && bounded ? 0 : 1);
