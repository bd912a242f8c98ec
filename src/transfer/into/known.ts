/**
 * The leaves the last complete read of a copy into a result took
 * (into/leaves.ts), so that a copy of the same leaves (a batch built step
 * after step in the same `hostArena` views, or the same arrays refilled)
 * skips reading them again: what that read recorded for them (their bytes,
 * class, arena and offset, each group's state) still holds.
 *
 * Why identity is enough: a tensor's dtype, shape and device never change,
 * nor the data it wraps (the library rebinds only its own results, and
 * `Tensor.from` keeps a fixed-length view); a view's class, buffer and byte
 * offset never change. What can change is whether the bytes are still
 * there: a disposed tensor, a buffer detached (transferred, or an arena's
 * when it is disposed) or resized. Two ways to check it:
 *
 * - where every known leaf lies in an `ArrayBuffer` that cannot be resized,
 *   and no tensor that wraps host data was disposed since the last read
 *   (a counter, `hostTensorDisposals`), it is enough that none of those
 *   buffers (one, for a batch in an arena) was detached;
 * - otherwise each leaf is checked as the full read checks its length: a
 *   disposed tensor, a detached or resized buffer reads as a different
 *   one, and the full read then says why.
 *
 * (A known leaf whose prototype was changed since, say to
 * `DataView.prototype`, is still taken as the view it is: its bytes are
 * the same; a full read would refuse it.)
 *
 * @module
 */

import {
  isArrayBufferDetached,
  isFixedArrayBuffer,
  type TypedArray,
  viewBuffer,
  viewByteLength,
} from "../../dtype.ts";
import { hostTensorDisposals, Tensor, tensorInternals } from "../../tensor.ts";

/** In {@linkcode KnownLeaves.leaves}: a position whose leaf the last read did not take on its common path. */
export const NOT_KNOWN: unique symbol = Symbol("not known");

/** What a record keeps of its last complete read. */
export interface KnownLeaves {
  /**
   * By position, the leaf that read took on its common path (a TypedArray
   * or CPU tensor that fit, with host bytes); {@linkcode NOT_KNOWN} elsewhere.
   */
  readonly leaves: unknown[];
  /** Whether that read completed (the record's columns are its). */
  complete: boolean;
  /**
   * The buffers the known leaves' bytes lie in, each an `ArrayBuffer` that
   * cannot be resized (a neighbour's repeated once at most); undefined where
   * some leaf lies in another (a resizable or shared one).
   */
  buffers: ArrayBuffer[] | undefined;
  /** `hostTensorDisposals()` at that read. */
  disposals: number;
  /**
   * Whether the sources are the known leaves, found so by the last
   * {@linkcode sameLeaves} and not rewritten since (the caller clears it
   * when it rewrites them): then they are not compared again.
   */
  sameSources: boolean;
}

/** Reads that found the known leaves by their buffers, and leaf by leaf (for tests). */
export const sameLeavesCounts: { byBuffers: number; byLeaves: number } = {
  byBuffers: 0,
  byLeaves: 0,
};

/** The known leaves of a result of `n` tensors: none yet. */
export function knownLeaves(n: number): KnownLeaves {
  return {
    leaves: new Array(n).fill(NOT_KNOWN),
    complete: false,
    buffers: [],
    disposals: 0,
    sameSources: false,
  };
}

/** A full read starts: until it completes, nothing is known. */
export function startRead(known: KnownLeaves): void {
  known.complete = false;
  known.sameSources = false;
  if (known.buffers !== undefined) known.buffers.length = 0;
  else known.buffers = [];
  known.disposals = hostTensorDisposals();
}

/** The full read took leaf `x` at position `n`, its bytes `view`; or none (`view` undefined). */
export function noteLeaf(
  known: KnownLeaves,
  n: number,
  x: unknown,
  view: TypedArray | undefined,
): void {
  if (view === undefined) {
    known.leaves[n] = NOT_KNOWN;
    return;
  }
  known.leaves[n] = x;
  const buffers = known.buffers;
  if (buffers === undefined) return;
  const buffer = viewBuffer(view);
  if (buffer === buffers[buffers.length - 1]) return;
  if (isFixedArrayBuffer(buffer)) buffers.push(buffer as ArrayBuffer);
  else known.buffers = undefined;
}

/**
 * Whether every leaf in `sources` (this read's, by position) is the known
 * one, its bytes still in place (see the module's comment). `views` and
 * `byteLengths` are the record's columns of the last read.
 */
export function sameLeaves(
  known: KnownLeaves,
  sources: readonly unknown[],
  views: readonly (TypedArray | undefined)[],
  byteLengths: Float64Array,
): boolean {
  if (!known.complete) return false;
  const { leaves, buffers } = known;
  const compared = known.sameSources;
  if (buffers !== undefined && known.disposals === hostTensorDisposals()) {
    if (!compared) {
      for (let n = 0; n < sources.length; n++) if (sources[n] !== leaves[n]) return false;
    }
    for (let b = 0; b < buffers.length; b++) if (isArrayBufferDetached(buffers[b])) return false;
    known.sameSources = true;
    sameLeavesCounts.byBuffers++;
    return true;
  }
  for (let n = 0; n < sources.length; n++) {
    const x = sources[n];
    if (!compared && x !== leaves[n]) return false;
    if (x instanceof Tensor) {
      // A disposed tensor reads as REJECTED_LEAF; a grown length-tracking
      // view as a fresh view: neither is the one recorded.
      if (tensorInternals.walkData(x) !== views[n]) return false;
    } else if (viewByteLength(x as TypedArray) !== byteLengths[n]) {
      return false;
    }
  }
  known.sameSources = true;
  sameLeavesCounts.byLeaves++;
  return true;
}
