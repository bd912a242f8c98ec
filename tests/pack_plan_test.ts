import assert from "node:assert/strict";
import {
  effectiveAlignment,
  MAX_PACKED_TENSOR_BYTES,
  packCandidates,
  planPacking,
  SequentialPacker,
} from "../src/pack_plan.ts";

const defaults = { minPackedAlignmentBytes: 16, maxPackedChunkBytes: 32 * 1024 * 1024 };

function plan(
  bytes: number[],
  elementSizes: number[],
  options = defaults,
  base = (_: number, _capacity: number) => 0,
) {
  return planPacking({ bytes, elementSizes }, packCandidates(bytes, options), options, base);
}

Deno.test("effectiveAlignment() is max(min, element size) rounded up to the element size", () => {
  assert.equal(effectiveAlignment(16, 4), 16);
  assert.equal(effectiveAlignment(1, 8), 8);
  assert.equal(effectiveAlignment(6, 4), 8);
  assert.equal(effectiveAlignment(6, 1), 6);
  assert.equal(effectiveAlignment(6, 2), 6);
  assert.equal(effectiveAlignment(3, 2), 4);
});

Deno.test("packCandidates() takes tensors up to 256 KiB and needs at least two", () => {
  assert.deepEqual(packCandidates([10, MAX_PACKED_TENSOR_BYTES + 1, 20], defaults), [0, 2]);
  assert.deepEqual(packCandidates([10, MAX_PACKED_TENSOR_BYTES + 1], defaults), []);
  assert.deepEqual(packCandidates([MAX_PACKED_TENSOR_BYTES, 0], defaults), [0, 1]);
});

Deno.test("packCandidates() leaves out tensors larger than a chunk", () => {
  const options = { minPackedAlignmentBytes: 16, maxPackedChunkBytes: 100 };
  assert.deepEqual(packCandidates([50, 200, 60, 100], options), [0, 2, 3]);
});

Deno.test("planPacking() lays out buckets of decreasing alignment, input order inside", () => {
  // int8 (align 16 with the default), float64, then with min 1: 8, 4, 2, 1.
  const options = { minPackedAlignmentBytes: 1, maxPackedChunkBytes: 1 << 20 };
  const [chunk] = plan([3, 8, 4, 6, 16], [1, 8, 4, 2, 8], options);
  assert.deepEqual(chunk.members, [1, 4, 2, 3, 0]);
  assert.deepEqual(chunk.offsets, [0, 8, 24, 28, 34]);
  assert.equal(chunk.start, 0);
  assert.equal(chunk.end, 37);
});

Deno.test("planPacking() aligns every member's absolute address", () => {
  const bytes = [1, 2, 3, 4, 8, 12, 7, 5, 16, 10];
  const elementSizes = [1, 2, 1, 4, 8, 4, 1, 1, 8, 2];
  for (const min of [1, 2, 3, 6, 16, 24, 100]) {
    for (const base of [0, 1, 7, 256, 4099]) {
      const options = { minPackedAlignmentBytes: min, maxPackedChunkBytes: 1 << 20 };
      const chunks = plan(bytes, elementSizes, options, () => base);
      for (const chunk of chunks) {
        Array.from(chunk.members).forEach((member, m) => {
          const align = effectiveAlignment(min, elementSizes[member]);
          assert.equal((base + chunk.offsets[m]) % align, 0, `min ${min} base ${base}`);
        });
      }
    }
  }
});

Deno.test("planPacking() keeps each chunk's payload within maxPackedChunkBytes", () => {
  const bytes = Array.from({ length: 20 }, () => 256);
  const options = { minPackedAlignmentBytes: 16, maxPackedChunkBytes: 512 };
  const chunks = plan(bytes, bytes.map(() => 4), options);
  assert.equal(chunks.length, 10);
  for (const chunk of chunks) assert.ok(chunk.end - chunk.start <= 512);
  assert.deepEqual(
    chunks.flatMap((c) => Array.from(c.members)).sort((a, b) => a - b),
    [...bytes.keys()],
  );
});

Deno.test("planPacking() asks for enough capacity to hold each chunk", () => {
  const bytes = [5, 17, 33, 1, 0, 9];
  const capacities: number[] = [];
  const options = { minPackedAlignmentBytes: 16, maxPackedChunkBytes: 40 };
  const chunks = plan(bytes, bytes.map(() => 1), options, (_, capacity) => {
    capacities.push(capacity);
    return 3;
  });
  chunks.forEach((chunk, c) => assert.ok(chunk.end <= capacities[c]));
});

Deno.test("planPacking() places zero-length tensors without taking room", () => {
  const [chunk] = plan([0, 0, 4], [4, 4, 4]);
  assert.deepEqual(chunk.members, [0, 1, 2]);
  assert.deepEqual(chunk.offsets, [0, 0, 0]);
  assert.equal(chunk.end, 4);
});

Deno.test("SequentialPacker gives the layout planPacking gives for a uniform alignment", () => {
  const bytes = [12, 300_000, 0, 7, 64, 1, 40, 256 * 1024, 3];
  const elementSizes = [4, 4, 8, 1, 8, 1, 2, 4, 1];
  for (const min of [8, 16, 64, 256]) {
    const options = { minPackedAlignmentBytes: min, maxPackedChunkBytes: 1 << 22 };
    const packer = new SequentialPacker(options);
    bytes.forEach((size, i) => packer.add(i, size));
    assert.ok(packer.valid);
    const [chunk] = plan(bytes, elementSizes, options, () => 4096);
    assert.deepEqual(Array.from(packer.members), chunk.members);
    assert.deepEqual(Array.from(packer.offsets.view()), chunk.offsets);
    assert.equal(packer.end, chunk.end);
  }
});

Deno.test("SequentialPacker keeps its offsets aligned past 2^31 bytes (beyond 32-bit bit operations)", () => {
  const packer = new SequentialPacker({
    minPackedAlignmentBytes: 64,
    maxPackedChunkBytes: 2 ** 33,
  });
  let end = 0;
  for (let i = 0; end < 2 ** 31 + 2 ** 20; i++) {
    const size = i % 2 === 0 ? 256 * 1024 - 1 : 3;
    assert.equal(packer.add(i, size), true);
    const offset = packer.offsets.data[packer.offsets.length - 1];
    assert.equal(offset, Math.ceil(end / 64) * 64, `tensor ${i}`);
    end = offset + size;
  }
  assert.equal(packer.end, end);
  packer.dispose();
});

Deno.test("SequentialPacker gives up when buckets or several chunks are needed", () => {
  assert.equal(new SequentialPacker({ ...defaults, minPackedAlignmentBytes: 4 }).valid, false);
  assert.equal(new SequentialPacker({ ...defaults, minPackedAlignmentBytes: 24 }).valid, false);
  const packer = new SequentialPacker({ minPackedAlignmentBytes: 16, maxPackedChunkBytes: 100 });
  assert.equal(packer.add(0, 60), true);
  assert.equal(packer.add(1, 200), false);
  assert.equal(packer.valid, true);
  assert.equal(packer.add(2, 60), false);
  assert.equal(packer.valid, false);
});
