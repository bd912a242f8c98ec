/**
 * The pools' fast path, old code against new code in one process: the
 * nanoseconds of one acquire and release of a cached block (pinned 256 KiB,
 * device 1 MiB) and of a pooled event, each version with its own shim and
 * pools, alternating in rounds so that both see the same machine. Also
 * counts the shim's allocations during the loop (0 in steady state).
 *
 * Run, from the new checkout:
 * `deno run --allow-ffi --allow-read --allow-env bench/ab_pool.ts <old checkout> [iterations]`
 * (needs a GPU).
 *
 * @module
 */

import { abArgs, exitWithoutGpu } from "./_ab_args.ts";

type Pool = { acquire(bytes: number): unknown; release(block: never): void };
interface Side {
  pinned: Pool;
  device: Pool;
  acquireEvent(device: number): number;
  releaseEvent(device: number, event: number): void;
  misses(): number;
}

const { oldRoot, iterations } = abArgs(200_000);
exitWithoutGpu(await import(new URL("mod.ts", oldRoot).href));

async function side(root: URL): Promise<Side> {
  const { pinnedPool } = await import(new URL("src/memory/pinned_memory.ts", root).href);
  const { devicePool } = await import(new URL("src/memory/device_memory.ts", root).href);
  const events = await import(new URL("src/memory/event_pool.ts", root).href);
  const device = devicePool(0);
  return {
    pinned: pinnedPool,
    device,
    acquireEvent: events.acquireEvent,
    releaseEvent: events.releaseEvent,
    misses: () => pinnedPool.stats().misses + device.stats().misses,
  };
}

const sides = {
  old: await side(oldRoot),
  new: await side(new URL("../", import.meta.url)),
};

const cases: [string, (s: Side) => void][] = [
  ["pinned 256 KiB", (s) => s.pinned.release(s.pinned.acquire(256 * 1024) as never)],
  ["device 1 MiB", (s) => s.device.release(s.device.acquire(1024 * 1024) as never)],
  ["event", (s) => s.releaseEvent(0, s.acquireEvent(0))],
];

const ROUNDS = 10;
for (const [name, step] of cases) {
  const times: Record<string, number[]> = { old: [], new: [] };
  const misses: Record<string, number> = { old: 0, new: 0 };
  for (const which of ["old", "new"] as const) step(sides[which]); // warm: the first allocates
  for (let round = 0; round < ROUNDS; round++) {
    for (const which of ["old", "new"] as const) {
      const s = sides[which];
      const before = s.misses();
      const start = performance.now();
      for (let i = 0; i < iterations / ROUNDS; i++) step(s);
      times[which].push(((performance.now() - start) * 1e6) / (iterations / ROUNDS));
      misses[which] += s.misses() - before;
    }
  }
  const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1];
  console.log(
    `${name}: old ${median(times.old).toFixed(1)} ns, new ${median(times.new).toFixed(1)} ns ` +
      `per acquire + release (median of ${ROUNDS} rounds); allocations in the loop: old ` +
      `${misses.old}, new ${misses.new}`,
  );
}
