/**
 * The host's packing threads alone (`copyPieces`, native/copy_pieces.c):
 * 1000 × 4 KB into one pinned block, in one call and split into 4 and 8
 * calls, without and (on a GPU) with each piece's DMA queued after it, each
 * after 300 µs of idle (a training loop's cadence). It measures what one
 * call costs beyond its copying: the wake-up of the helper threads, which
 * decides whether splitting a large chunk to overlap its packing with its
 * DMA can pay (bench/RESULTS.md, tenth session: on an H100 host it cannot,
 * each call costs ~45 µs more).
 *
 * Run: `deno run --allow-ffi --allow-read --allow-env bench/pack_pieces.ts`
 * (`MTC_STAGING_THREADS`-like `T=<threads>`, default 14).
 *
 * @module
 */

import { copyAsync, copyPieces, viewAddress } from "../ffi/native.ts";
import { streamSynchronize } from "../ffi/streams.ts";
import { deviceCount } from "../mod.ts";
import { devicePool } from "../src/memory/device_memory.ts";
import { pinnedPool } from "../src/memory/pinned_memory.ts";

if (deviceCount() === 0) {
  console.log("Needs a CUDA device (pinned memory comes from the driver).");
  Deno.exit(0);
}
const count = 1000, size = 4096;
const threads = Number(Deno.env.get("T") ?? 14);
const arrays = Array.from({ length: count }, (_, i) => new Float32Array(size / 4).fill(i));
const block = pinnedPool.acquire(count * size);
const device = devicePool(0).acquire(count * size);
// The pieces' table: source, destination, bytes (native/gather_entry.h's layout).
const table = new Float64Array(3 * count);
for (let i = 0; i < count; i++) {
  table.set([viewAddress(arrays[i]), block.address + i * size, size], 3 * i);
}

/** Packs the 4 MB in `calls` calls, each followed by its piece's DMA when `dma`. */
function pack(calls: number, dma: boolean): void {
  const per = count / calls;
  for (let c = 0; c < calls; c++) {
    copyPieces(table.subarray(3 * per * c), per, threads);
    if (!dma) continue;
    const at = c * per * size;
    copyAsync({ device: 0, dst: device.address + at, src: block.address + at, bytes: per * size });
  }
  if (dma) streamSynchronize(0);
}

const idle = (us: number) => {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
};
for (let round = 0; round < 2; round++) {
  for (const dma of [false, true]) {
    for (const calls of [1, 4, 8]) {
      const samples: number[] = [];
      for (let i = 0; i < 400; i++) {
        idle(300);
        const start = performance.now();
        pack(calls, dma);
        samples.push((performance.now() - start) * 1000);
      }
      samples.sort((a, b) => a - b);
      const name = `${dma ? "pack + DMA" : "pack"}, ${calls} call${calls > 1 ? "s" : ""}`;
      console.log(
        `${name.padEnd(20)} median ${samples[200].toFixed(1)} µs, p10 ${samples[40].toFixed(1)}`,
      );
    }
  }
}
pinnedPool.release(block);
devicePool(0).release(device);
