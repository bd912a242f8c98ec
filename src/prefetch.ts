/**
 * `prefetch`: keep the next batches' copies in flight while the current one
 * is used, the loop helper every training script would otherwise write.
 *
 * @module
 */

import { parseDevice } from "./device.ts";
import { checkAfter } from "./gpu/after.ts";
import { resolveOptions, type StartCopyOptions } from "./options.ts";
import { shown } from "./shown.ts";
import { prefetchBatches, type PrefetchSource } from "./prefetch_pipeline.ts";
import type { CopyResult } from "./copy_result.ts";

/** Options of {@linkcode prefetch}: those of `startCopy`, and two of its own. */
export interface PrefetchOptions extends StartCopyOptions {
  /**
   * Copies kept in flight beyond the batch being used (integer >= 1;
   * default 2): while the loop body works on batch k, batches k+1 to
   * k+depth are being pulled from the source and copied.
   */
  depth?: number;
  /**
   * Dispose each yielded result when the next one is taken, and the last one
   * when the iteration ends (default false). On, the loop holds at most one
   * batch's device memory outside the copies in flight; off, the loop body
   * owns each result and disposes it itself.
   */
  disposePrevious?: boolean;
}

/**
 * Copies each batch of `source` to `device` ahead of its use: an async
 * iterator (for `for await`) that keeps `depth` copies in flight, so the
 * next batches' transfers overlap the current step's compute.
 *
 * Errors surface at the iteration they belong to: a batch `startCopy`
 * rejects, a copy that fails, or the source itself throwing, after the
 * batches before it were yielded. Leaving the loop (`break`, `return`, an
 * exception) cancels cleanly: the source is closed at once (its `return()`,
 * even while a pull from it is pending: a channel's pending `next()` may
 * settle only then), a batch that pull still delivers is not copied, and
 * the copies in flight are awaited and their results disposed, as is the
 * last result with `disposePrevious`, whatever `return()` does (one that
 * never settles holds the loop's exit, as it holds `for await`'s, but not
 * that cleanup). An error
 * that `return()` throws then surfaces from the loop's exit (unless the
 * loop is leaving on an error of its own, which wins). An async generator
 * runs a `return()` only once its pending `next()` has settled (the
 * language queues it): leaving the loop waits for that batch to be made.
 *
 * The source must not reuse a batch's memory while the loop may still
 * read it: when the source builds a batch, up to `depth` earlier ones are
 * alive (the one in use and the copies in flight behind it), so a source
 * that recycles buffers (or `hostArena`s, with `reset()`) needs a ring of
 * `depth + 1`. On the `"cpu"` target a result is its batch's memory itself
 * (no copy): a recycled buffer shows a later batch's values, silently
 * (on a GPU, an arena's `reset()` throws while a copy reads it).
 *
 * Each result owns its tensors (see `startCopy`): disposing it, as
 * `disposePrevious` does, never disposes a tensor of the source's batches,
 * even one already on `device`.
 *
 * @param source batches: an `Iterable` or an `AsyncIterable`; as with `for
 * await`, an `Iterable`'s values are awaited (an array of promises of
 * batches is a source of batches), and the source is opened at the first
 * step
 * @param device `"cpu"`, `"cuda"` or `"cuda:N"` (required)
 * @param options `startCopy`'s options, `depth` and `disposePrevious`
 * @returns an async iterator of the copied batches, in source order
 * @throws {TypeError} at once, for a source that is not iterable, a missing
 * or malformed device, options that are not an object, a `depth` that is
 * not a number, or bad options
 * @throws {RangeError} at once, for a `depth` that is not an integer >= 1,
 * or a device or option out of range
 *
 * @example Feed a training loop
 * ```ts
 * import { deviceCount, prefetch } from "@mtc/core";
 * import assert from "node:assert/strict";
 * async function* batches() {
 *   for (let step = 0; step < 4; step++) yield { boxes: new Float32Array(8).fill(step) };
 * }
 * const device = deviceCount() > 0 ? "cuda:0" : "cpu";
 * let steps = 0;
 * for await (const batch of prefetch(batches(), device, { disposePrevious: true })) {
 *   assert.equal(batch.boxes.device, device);
 *   steps++;
 * }
 * assert.equal(steps, 4);
 * ```
 */
export function prefetch<T>(
  source: Iterable<T | PromiseLike<T>> | AsyncIterable<T>,
  device: string,
  options: PrefetchOptions = {},
): AsyncGenerator<CopyResult<T>, void, undefined> {
  const open = iteratorOf(source);
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`Invalid prefetch options ${shown(options)}: expected an object`);
  }
  // Own options only (the rest is own too): a key on Object.prototype is none.
  const { depth: ownDepth, disposePrevious: ownDispose, ...copyOptions } = options;
  const depth = Object.hasOwn(options, "depth") && ownDepth !== undefined ? ownDepth : 2;
  const disposePrevious = Object.hasOwn(options, "disposePrevious") && ownDispose !== undefined
    ? ownDispose
    : false;
  if (typeof depth !== "number") {
    throw new TypeError(`Invalid prefetch depth ${shown(depth)}: expected a number`);
  }
  if (!Number.isSafeInteger(depth) || depth < 1) {
    throw new RangeError(`Invalid prefetch depth ${shown(depth)}: expected an integer >= 1`);
  }
  if (typeof disposePrevious !== "boolean") {
    throw new TypeError(`Invalid disposePrevious ${shown(disposePrevious)}: expected a boolean`);
  }
  // Reject what startCopy would reject for every batch now, not at the first step.
  resolveOptions(copyOptions);
  if (copyOptions.after !== undefined) checkAfter(copyOptions.after, "option after", true);
  parseDevice(device);
  return prefetchBatches(open, { device, depth, disposePrevious, copyOptions });
}

/** How to open `source`'s iterator (opened only once every argument was accepted). */
function iteratorOf<T>(
  source: Iterable<T | PromiseLike<T>> | AsyncIterable<T>,
): () => PrefetchSource<T> {
  const iterable = source as
    | Partial<Iterable<T | PromiseLike<T>> & AsyncIterable<T>>
    | null
    | undefined;
  const asyncOpen = iterable?.[Symbol.asyncIterator];
  if (typeof asyncOpen === "function") {
    return () => ({ iterator: asyncOpen.call(iterable), sync: false });
  }
  const open = iterable?.[Symbol.iterator];
  if (typeof open === "function") return () => ({ iterator: open.call(iterable), sync: true });
  throw new TypeError(
    `Invalid prefetch source ${shown(source)}: expected an Iterable or an AsyncIterable`,
  );
}
