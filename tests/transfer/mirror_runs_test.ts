import assert from "node:assert/strict";
import { findRuns, MAX_DEVICE_RUN_GAP, type RunSources } from "../../src/transfer/mirror_runs.ts";

// Which CUDA→CPU leaves go as runs (one DMA each, no gather): consecutive
// packing candidates of one storage at rising addresses, close together (a
// larger leaf goes alone and does not end a run). Runs of one leaf are none. (The DMA and the outputs' bytes:
// tests/gpu/cuda_to_cpu_test.ts.)

interface Leaf {
  address: number;
  bytes: number;
  storage: string;
}

function sources(leaves: Leaf[], maxPackedChunkBytes = 32 << 20): RunSources & { asked: number[] } {
  const asked: number[] = [];
  return {
    asked,
    options: { maxPackedChunkBytes },
    outputs: leaves.map(({ bytes }) => ({ byteLength: bytes })),
    sourceAddress: (i) => (asked.push(i), leaves[i].address),
    sourceStorage: (i) => leaves[i].storage,
    inputStorages: () => [...new Set(leaves.filter((l) => l.bytes > 0).map((l) => l.storage))],
  };
}

const all = (n: number) => Array.from({ length: n }, (_, i) => i);
/** Each run as [its positions, start, end]. */
function spans(runs: ReturnType<typeof findRuns>): [number[], number, number][] {
  if (runs === undefined) return [];
  return runs.ranges.map(({ start, end, count }, r) => {
    const members = [...runs.runOf.keys()].filter((k) => runs.runOf[k] === r);
    assert.equal(members.length, count);
    return [members, start, end];
  });
}

Deno.test("a packed result (leaves in order, padding between them) is one run over its range", () => {
  const leaves = [
    { address: 1024, bytes: 10, storage: "a" },
    { address: 1040, bytes: 16, storage: "a" },
    { address: 1056, bytes: 3, storage: "a" },
  ];
  assert.deepEqual(spans(findRuns(sources(leaves), all(3))), [[[0, 1, 2], 1024, 1059]]);
});

Deno.test("a run ends at another storage, a falling address or a gap past MAX_DEVICE_RUN_GAP; a large leaf is passed over", () => {
  const leaves = [
    { address: 0, bytes: 8, storage: "a" },
    { address: 16, bytes: 8, storage: "a" }, // run 1
    { address: 32, bytes: 8, storage: "b" }, // another block: starts run 2
    { address: 48, bytes: 8, storage: "b" },
    { address: 40, bytes: 8, storage: "b" }, // falls back: starts run 3
    { address: 48 + MAX_DEVICE_RUN_GAP, bytes: 8, storage: "b" }, // a gap of exactly MAX_DEVICE_RUN_GAP
    { address: 2000, bytes: 8, storage: "b" }, // too far: alone
    { address: 9000, bytes: 300 << 10, storage: "c" }, // over 256 KiB: never in a run
    { address: 2016, bytes: 8, storage: "b" }, // goes on from 2000
  ];
  assert.deepEqual(spans(findRuns(sources(leaves), all(leaves.length))), [
    [[0, 1], 0, 24],
    [[2, 3], 32, 56],
    [[4, 5], 40, 48 + MAX_DEVICE_RUN_GAP + 8],
    [[6, 8], 2000, 2024],
  ]);
});

Deno.test("a run's range stays within maxPackedChunkBytes", () => {
  const leaves = all(6).map((i) => ({ address: 64 * i, bytes: 64, storage: "a" }));
  assert.deepEqual(spans(findRuns(sources(leaves, 128), all(6))), [
    [[0, 1], 0, 128],
    [[2, 3], 128, 256],
    [[4, 5], 256, 384],
  ]);
});

Deno.test("an empty leaf joins an open run wherever it lies, and its address is not asked", () => {
  const leaves = [
    { address: 0, bytes: 0, storage: "?" }, // no run open: left out
    { address: 100, bytes: 4, storage: "a" },
    { address: 9999, bytes: 0, storage: "?" },
    { address: 112, bytes: 4, storage: "a" },
  ];
  const route = sources(leaves);
  assert.deepEqual(spans(findRuns(route, all(4))), [[[1, 2, 3], 100, 116]]);
  assert.deepEqual(route.asked, [1, 3]);
});

Deno.test("runs follow the list's order, not the route's; a leaf left out is a gap", () => {
  const leaves = all(4).map((i) => ({ address: 16 * i, bytes: 16, storage: "a" }));
  assert.deepEqual(spans(findRuns(sources(leaves), [3, 2, 1, 0])), []);
  // Leaf 1's bytes are copied too (a gap of 16), never viewed.
  assert.deepEqual(spans(findRuns(sources(leaves), [0, 2, 3])), [[[0, 1, 2], 0, 64]]);
  assert.deepEqual(spans(findRuns(sources(leaves), [1, 0, 2, 3])), [[[1, 2, 3], 0, 64]]);
});
