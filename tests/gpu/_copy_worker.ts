/**
 * A Worker for tests/gpu/workers_test.ts: uses the library from its own
 * isolate (own pools, same shim, caches and streams as the main thread's)
 * and reports back.
 *
 * Messages: `{ kind: "round trips", seed, rounds }` copies a batch to
 * `cuda:0` and back `rounds` times, checks every byte, disposes and answers
 * `{ rounds, inUseBytes }` (or `{ error }`); `{ kind: "flood" }` starts 32
 * copies without waiting for them and answers `"started"` (the test then
 * terminates the Worker); `{ kind: "copy and end", bytes, seed, dispose }`
 * copies `bytes` to `cuda:0` and back, checks them, disposes both results
 * or drops them, and answers `{ deviceUsedBytes }` (the device memory in
 * use at its peak, as the driver counts it) before the test ends it;
 * `{ kind: "post copy back", bytes, seed }` copies `bytes` to `cuda:0` and
 * back and posts `{ buffer, offset }`, the result's buffer (its pinned
 * block) with a transfer list and where the bytes lie in it, keeping nothing; `{ kind: "kernel and end", bytes, holdNs }` copies
 * `bytes` to `cuda:0` with an output of as many bytes, then on a stream of
 * its own runs a kernel that waits `holdNs` and copies the one into the
 * other, and answers `"launched"` at once (the test ends the Worker while
 * the kernel still runs); `{ kind: "arena and end", bytes }` makes a host
 * arena of `bytes`, fills it, keeps it undisposed and answers `"made"`.
 */

import { testAids } from "../../ffi/test_aids.ts";
import {
  createStream,
  disposeAll,
  type HostArena,
  hostArena,
  loadModule,
  memoryStats,
  startCopy,
} from "../../mod.ts";
import { createBatchMetaData } from "../../examples/reference_batch.ts";
import { assertRoundTrip, randomArray, stepKernelsPtx } from "./_helpers.ts";

type Request =
  | { kind: "round trips"; seed: number; rounds: number }
  | { kind: "flood" }
  | { kind: "copy and end"; bytes: number; seed: number; dispose: boolean }
  | { kind: "post copy back"; bytes: number; seed: number }
  | { kind: "kernel and end"; bytes: number; holdNs: number }
  | { kind: "arena and end"; bytes: number };

const worker = self as unknown as {
  onmessage: (event: MessageEvent<Request>) => void;
  postMessage(message: unknown, transfer?: Transferable[]): void;
};

function deviceUsedBytes(): number {
  const { free, total } = testAids!.memInfo(0);
  return total - free;
}

async function copyAndEnd(bytes: number, seed: number, dispose: boolean): Promise<unknown> {
  const input = new Uint8Array(bytes);
  for (let offset = 0; offset < bytes; offset += 65536) {
    crypto.getRandomValues(input.subarray(offset, offset + 65536));
  }
  input[0] = seed;
  const onDevice = await startCopy([input], "cuda:0").get();
  const back = await startCopy(onDevice, "cpu").get();
  const peak = deviceUsedBytes();
  const output = back[0].toTypedArray() as Uint8Array;
  for (let i = 0; i < bytes; i++) {
    if (output[i] !== input[i]) throw new Error(`byte ${i} differs after the round trip`);
  }
  // Dropped results are left to the end of the Worker (no finalizer runs then).
  if (dispose) disposeAll([onDevice, back]);
  return { deviceUsedBytes: peak };
}

async function postCopyBack(bytes: number, seed: number): Promise<void> {
  const onDevice = await startCopy([randomArray(Uint8Array, bytes, seed)], "cuda:0").get();
  const [back] = await startCopy(onDevice, "cpu").get();
  disposeAll(onDevice);
  const view = back.toTypedArray();
  const buffer = view.buffer as ArrayBuffer; // the whole pinned block
  worker.postMessage({ buffer, offset: view.byteOffset }, [buffer]);
}

async function kernelAndEnd(bytes: number, holdNs: number): Promise<void> {
  const module = await loadModule(await stepKernelsPtx());
  const spin = module.kernel("spin_ns", ["u64"]);
  const copyU8 = module.kernel("copy_u8", ["ptr", "ptr", "u64"]);
  // Sent alone (large): each in a device block of its own size class.
  const [source, output] = await startCopy(
    [randomArray(Uint8Array, 2 * bytes, 1), new Uint8Array(bytes)],
    "cuda:0",
  ).get();
  const stream = createStream("cuda:0");
  spin.launch({ grid: 1, block: 1, args: [BigInt(holdNs)], stream });
  copyU8.launch({ grid: 64, block: 256, args: [source, output, bytes], stream });
  worker.postMessage("launched");
}

// Kept reachable until the Worker is ended.
const arenas: HostArena[] = [];

worker.onmessage = async ({ data }) => {
  if (data.kind === "arena and end") {
    const arena = hostArena(data.bytes);
    arena.uint8(data.bytes).fill(1);
    arenas.push(arena);
    worker.postMessage("made");
    return;
  }
  if (data.kind === "flood") {
    for (let i = 0; i < 32; i++) startCopy([randomArray(Uint8Array, 1 << 20, i)], "cuda:0");
    worker.postMessage("started");
    return;
  }
  try {
    if (data.kind === "copy and end") {
      worker.postMessage(await copyAndEnd(data.bytes, data.seed, data.dispose));
      return;
    }
    if (data.kind === "post copy back") return await postCopyBack(data.bytes, data.seed);
    if (data.kind === "kernel and end") return await kernelAndEnd(data.bytes, data.holdNs);
    for (let round = 0; round < data.rounds; round++) {
      const input = {
        batch: createBatchMetaData(4, data.seed + round),
        large: randomArray(Float32Array, 300_000, data.seed + round),
      };
      const onDevice = await startCopy(input, "cuda:0").get();
      const back = await startCopy(onDevice, "cpu").get();
      assertRoundTrip(input, back, "cpu");
      disposeAll([onDevice, back]);
    }
    const stats = memoryStats();
    const inUseBytes = stats.pinned.inUseBytes +
      Object.values(stats.devices).reduce((sum, pool) => sum + pool.inUseBytes, 0);
    worker.postMessage({ rounds: data.rounds, inUseBytes });
  } catch (error) {
    worker.postMessage({ error: String((error as Error)?.stack ?? error) });
  }
};
