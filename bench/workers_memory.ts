/**
 * What Workers that end leave behind: the main thread runs N Workers in
 * turn; each copies a pageable array (256 MiB by default) to cuda:0, awaits
 * it, disposes the result (or, given `drop`, keeps it) and ends (terminated
 * by the main thread, as a data loader's pool would). After each Worker the process's device memory
 * in use (the driver's `cuMemGetInfo`, through the test aids), its resident
 * memory (pinned memory is resident), the shim's allocation counters and,
 * where the library reports them, the pinned bytes the process holds are
 * printed. Uses only the public API and the test aids, so the same file runs
 * against older versions of the library.
 *
 * Run: `deno task build && MTC_SHIM_PATH=native/build/libmtc_testaid.so deno run --allow-ffi
 * --allow-read --allow-env bench/workers_memory.ts [workers] [MiB per Worker] [drop]`
 * (needs a GPU).
 *
 * @module
 */

import { testAids } from "../ffi/test_aids.ts";
import { deviceCount, memoryStats } from "../mod.ts";

if (deviceCount() === 0 || !testAids) {
  console.log("Needs a GPU and the test-aid build (MTC_SHIM_PATH=native/build/libmtc_testaid.so).");
  Deno.exit(0);
}
const workers = Number(Deno.args[0] ?? 6);
const MiB = 2 ** 20;
const bytes = Number(Deno.args[1] ?? 256) * MiB;
const dispose = Deno.args[2] !== "drop";

// The Worker's code: imports the library from this checkout.
const source = `
  import { disposeAll, memoryStats, startCopy } from ${
  JSON.stringify(new URL("../mod.ts", import.meta.url).href)
};
  self.onmessage = async ({ data: { bytes, dispose } }) => {
    const input = new Uint8Array(bytes);
    input.fill(7);
    const output = await startCopy([input], "cuda:0").get();
    const stats = memoryStats();
    if (dispose) disposeAll(output);
    self.postMessage({
      pinned: stats.pinned.reservedBytes + stats.outsidePools.stagingBytes,
      device: stats.devices["cuda:0"]?.reservedBytes ?? 0,
    });
  };`;
const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));

function deviceUsed(): number {
  const { free, total } = testAids!.memInfo(0);
  return total - free;
}

function mib(value: number): string {
  return `${(value / MiB).toFixed(0)} MiB`;
}

/** Pinned bytes the whole process holds, where the library says (process-wide since 0.3). */
function processPinned(): number | undefined {
  const stats = memoryStats() as unknown as {
    pinned: { processBytes?: number };
    outsidePools: { stagingBytes: number };
  };
  if (stats.pinned.processBytes === undefined) return undefined;
  return stats.pinned.processBytes + stats.outsidePools.stagingBytes;
}

const before = { device: deviceUsed(), rss: Deno.memoryUsage().rss, counters: testAids.counters() };
console.log(
  `${workers} Workers in turn, each copies ${mib(bytes)} to cuda:0, ` +
    `${dispose ? "disposes the result" : "keeps the result"}, ends`,
);
let workersPinned = 0;
for (let k = 1; k <= workers; k++) {
  const worker = new Worker(url, { type: "module" });
  const reply = await new Promise<{ pinned: number; device: number }>((resolve, reject) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(event.message));
    };
    worker.postMessage({ bytes, dispose });
  });
  worker.terminate();
  // The Worker's thread ends a little after terminate() returns.
  await new Promise((resolve) => setTimeout(resolve, 500));
  workersPinned += reply.pinned;
  const counters = testAids.counters();
  const pinned = processPinned();
  console.log(
    `after ${k} Workers: device in use +${mib(deviceUsed() - before.device)}, ` +
      `resident +${mib(Deno.memoryUsage().rss - before.rss)}, ` +
      `pinned held by the process ${pinned === undefined ? "(not reported)" : mib(pinned)}, ` +
      `pinned the Workers held at their peak (sum) ${mib(workersPinned)}, ` +
      `allocations: ${counters.hostAllocs - before.counters.hostAllocs} pinned, ` +
      `${counters.deviceAllocs - before.counters.deviceAllocs} device`,
  );
}
