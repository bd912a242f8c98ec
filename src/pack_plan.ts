/**
 * The packing plan: which small tensors share a chunk, and where each one
 * starts. Pure: sizes and alignments in, chunks and offsets out.
 *
 * Rules (those of the reference package):
 * - candidates are tensors of at most {@linkcode MAX_PACKED_TENSOR_BYTES}
 *   (and at most `maxChunkBytes`); at least two are needed to pack at all;
 * - each tensor's address is a multiple of its effective alignment,
 *   `max(minAlignment, elementSize)` rounded up to a multiple of
 *   `elementSize`;
 * - candidates are laid out in buckets of decreasing alignment (16, 8, 4, 2,
 *   1 with the defaults), keeping input order inside a bucket, which keeps
 *   padding small;
 * - a chunk's payload (first tensor's start to last tensor's end, padding
 *   included) is at most `maxChunkBytes`; a full chunk starts a new one.
 *
 * Alignment is computed against the chunk's real base address, which the
 * caller supplies when a chunk opens, so any alignment (even a non power of
 * two such as 6) holds for the actual addresses.
 *
 * @module
 */

import { borrowList, IndexList, type NumberList, returnList } from "./number_list.ts";

/** Tensors larger than this are never packed. */
export const MAX_PACKED_TENSOR_BYTES = 256 * 1024;

/** One planned chunk. */
export interface ChunkPlan {
  /** Indices (into the request arrays) of the tensors in this chunk. */
  readonly members: ArrayLike<number>;
  /** Byte offset of each member from `base`. */
  readonly offsets: ArrayLike<number>;
  /** Base address the offsets are relative to (from `openChunk`). */
  readonly base: number;
  /** Offset of the first member's first byte. */
  readonly start: number;
  /** Offset just past the last member's last byte. */
  readonly end: number;
}

/** Packing options (already validated). */
export interface PackOptions {
  /** Minimum alignment in bytes, an integer >= 1. */
  minPackedAlignmentBytes: number;
  /** Maximum chunk payload in bytes, an integer >= 1. */
  maxPackedChunkBytes: number;
}

/** The effective alignment of a packed tensor with `elementSize`-byte elements. */
export function effectiveAlignment(minAlignment: number, elementSize: number): number {
  return Math.ceil(Math.max(minAlignment, elementSize) / elementSize) * elementSize;
}

/**
 * Chooses which of the tensors `bytes[i]`/`elementSizes[i]` to pack.
 * Returns the candidate indices, or an empty list when fewer than two.
 */
export function packCandidates(
  bytes: ArrayLike<number>,
  options: PackOptions,
): number[] {
  const limit = Math.min(MAX_PACKED_TENSOR_BYTES, options.maxPackedChunkBytes);
  const candidates: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] <= limit) candidates.push(i);
  }
  return candidates.length >= 2 ? candidates : [];
}

// A multiple of every power-of-two alignment up to 2^20.
const BASE_MODULUS = 1 << 20;

/** The tensors a plan lays out: payload bytes and element size of each, by index. */
export interface PackSizes {
  bytes: ArrayLike<number>;
  elementSizes: ArrayLike<number>;
}

/**
 * Lays out `candidates` (indices into `sizes`) into chunks.
 *
 * @param openChunk called when a chunk opens with the chunk's index and the
 * bytes it may need (payload plus room to align its first member); returns
 * the chunk's base address
 */
export function planPacking(
  { bytes, elementSizes }: PackSizes,
  candidates: readonly number[],
  options: PackOptions,
  openChunk: (index: number, capacity: number) => number,
): ChunkPlan[] {
  const n = candidates.length;
  if (n === 0) return [];
  const min = options.minPackedAlignmentBytes;
  // Element sizes are 1, 2, 4 or 8: compute each alignment once.
  const alignOfSize = [0, 0, 0, 0, 0, 0, 0, 0, 0];
  const align: number[] = [];
  const distinct: number[] = [];
  for (let k = 0; k < n; k++) {
    const size = elementSizes[candidates[k]];
    let a = alignOfSize[size];
    if (a === 0) {
      a = alignOfSize[size] = effectiveAlignment(min, size);
      if (!distinct.includes(a)) distinct.push(a);
    }
    align.push(a);
  }
  // Buckets of decreasing alignment, input order inside each. There are
  // only a few distinct alignments (one per element size), so one pass per
  // bucket beats a comparison sort of all candidates.
  distinct.sort((a, b) => b - a);
  let reducible = true;
  for (const a of distinct) if (BASE_MODULUS % a !== 0) reducible = false;
  const order: number[] = [];
  for (const bucket of distinct) {
    for (let k = 0; k < n; k++) if (align[k] === bucket) order.push(k);
  }

  // Upper bound of the bytes still to place, for chunk capacities.
  let remaining = 0;
  for (let k = 0; k < n; k++) remaining += bytes[candidates[k]] + align[k] - 1;

  const chunks: ChunkPlan[] = [];
  let p = 0;
  while (p < n) {
    const firstAlign = align[order[p]];
    const capacity = Math.min(options.maxPackedChunkBytes, remaining) + firstAlign;
    const base = openChunk(chunks.length, capacity);
    // Reducing the (large, non-Smi) base address once keeps the loop in
    // integer math; valid when every alignment divides the modulus.
    const baseMod = reducible ? (base % BASE_MODULUS) | 0 : base;
    const members: number[] = [];
    const offsets: number[] = [];
    let start = -1;
    let end = 0;
    for (; p < n; p++) {
      const k = order[p];
      const size = bytes[candidates[k]];
      const a = align[k];
      // Offset whose absolute address base + offset is a multiple of a.
      const from = start < 0 ? 0 : end;
      const misalignment = (baseMod + from) % a;
      const offset = misalignment === 0 ? from : from + a - misalignment;
      if (start >= 0 && offset + size - start > options.maxPackedChunkBytes) break;
      if (start < 0) start = offset;
      members.push(candidates[k]);
      offsets.push(offset);
      end = offset + size;
      remaining -= size + a - 1;
    }
    chunks.push({ members, offsets, base, start, end });
  }
  return chunks;
}

/**
 * The packing plan built one tensor at a time, for the common case where
 * every candidate has the same alignment: `minPackedAlignmentBytes` a power
 * of two from 8 to 256 (the default is 16). Then there is a single bucket,
 * input order is the layout order, and a base address aligned to 256 bytes
 * (as device and pinned blocks are) aligns every member, so offsets can be
 * computed during the walk with no sort and no second pass. It gives
 * exactly the layout {@linkcode planPacking} gives with a 256-aligned base.
 * When the candidates do not fit one chunk it gives up, and the caller
 * falls back to {@linkcode planPacking}.
 */
export class SequentialPacker {
  /** Whether the plan is still valid. */
  valid: boolean;
  /** Offsets of the packed tensors from the chunk base. */
  readonly offsets: NumberList = borrowList();
  /** End of the payload. */
  end = 0;
  readonly #align: number;
  readonly #limit: number;
  readonly #maxChunk: number;
  // The packed tensors' indices: in the common case every leaf offered is
  // packed, and the list stays implicit.
  readonly #members = new IndexList();

  /** A packer for `options`; invalid from the start if they need buckets. */
  constructor(options: PackOptions) {
    const min = options.minPackedAlignmentBytes;
    this.valid = SequentialPacker.applies(min);
    this.#align = min;
    this.#maxChunk = options.maxPackedChunkBytes;
    this.#limit = Math.min(MAX_PACKED_TENSOR_BYTES, options.maxPackedChunkBytes);
  }

  /** Indices of the packed tensors (as given to `add`), in order. */
  get members(): ArrayLike<number> {
    return this.#members.view();
  }

  /** Returns the packer's lists for reuse; it must not be used afterwards. */
  dispose(): void {
    this.#members.release();
    returnList(this.offsets);
  }

  /** Whether alignment `min` gives every dtype the same alignment. */
  static applies(min: number): boolean {
    return min >= 8 && min <= 256 && (min & (min - 1)) === 0;
  }

  /**
   * Offers tensor `index` of `bytes` bytes. Returns false when it is no
   * candidate (too large); invalidates the plan when it does not fit.
   */
  add(index: number, bytes: number): boolean {
    return this.place(index, bytes) >= 0;
  }

  /** As {@linkcode SequentialPacker.add}, returning the offset given, or -1. */
  place(index: number, bytes: number): number {
    if (!this.valid || bytes > this.#limit) return -1;
    const align = this.#align;
    const end = this.end;
    // Rounding up by a bit mask (the alignment is a power of two) while
    // it stays within 32-bit integers, by a remainder beyond.
    let offset: number;
    if (end < BIT_MASK_LIMIT) {
      offset = (end + align - 1) & -align;
    } else {
      const misalignment = end % align;
      offset = misalignment === 0 ? end : end + align - misalignment;
    }
    if (offset + bytes > this.#maxChunk) {
      this.valid = false;
      return -1;
    }
    this.#members.push(index);
    this.offsets.push(offset);
    this.end = offset + bytes;
    return offset;
  }
}

/** Payload ends below this are rounded up with 32-bit bit operations. */
const BIT_MASK_LIMIT = 2 ** 30;
