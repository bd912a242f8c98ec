/**
 * `prefetch`: keep the next batches' copies in flight while the current one
 * is used, the loop helper every training script would otherwise write.
 *
 * @module
 */

import { disposeAll } from "./dispose.ts";
import { parseDevice } from "./device.ts";
import { checkAfter } from "./gpu/after.ts";
import { resolveOptions, type StartCopyOptions } from "./options.ts";
import type { AsyncCopyHandle } from "./copy_handle.ts";
import { shown } from "./shown.ts";
import { type CopyResult, startCopy } from "./start_copy.ts";

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

type Pending<R> = { handle: AsyncCopyHandle<R> } | { error: unknown };

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
  return run(open, { device, depth, disposePrevious, copyOptions });
}

/** How to open `source`'s iterator (opened only once every argument was accepted). */
function iteratorOf<T>(
  source: Iterable<T | PromiseLike<T>> | AsyncIterable<T>,
): () => Source<T> {
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

/**
 * An opened source. A sync iterator's values are awaited, as `for await`
 * does (an array of `Promise`s of batches is a source of batches).
 */
interface Source<T> {
  iterator: Iterator<T | PromiseLike<T>> | AsyncIterator<T>;
  sync: boolean;
}

interface Run {
  device: string;
  depth: number;
  disposePrevious: boolean;
  copyOptions: StartCopyOptions;
}

async function* run<T>(
  open: () => Source<T>,
  { device, depth, disposePrevious, copyOptions }: Run,
): AsyncGenerator<CopyResult<T>, void, undefined> {
  // Opened at the first step, as `for await` opens its source: a prefetch
  // that is never iterated (or returned before its first step, which runs
  // no `finally`) leaves the source unopened rather than open for ever.
  const { iterator, sync } = open();
  // Copies started (or the errors met), in source order, beyond the batch in use.
  const queue: Pending<CopyResult<T>>[] = [];
  let exhausted = false;
  // Set when the loop is left: a pull that settles later starts no copy.
  let closed = false;
  let previous: CopyResult<T> | undefined;
  // The loop waits for `changed()`; the pulls call `notify()`.
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  const changed = () => new Promise<void>((resolve) => wake = resolve);
  const pull = async (): Promise<void> => {
    let batch: T;
    try {
      const next: unknown = await iterator.next();
      if (typeof next !== "object" || next === null) {
        throw new TypeError(
          `Invalid prefetch source: its iterator's next() gave ${shown(next)}, expected an object`,
        );
      }
      if ((next as IteratorResult<unknown>).done) {
        exhausted = true;
        return;
      }
      batch = (next as IteratorResult<T | PromiseLike<T>>).value as T;
    } catch (error) {
      // The iterator failed: it is not closed (as `for await` leaves it).
      exhausted = true;
      if (!closed) queue.push({ error });
      return;
    }
    if (sync) {
      try {
        batch = await batch;
      } catch (error) {
        // A batch's promise rejected: the iterator is still open, and is
        // closed when the loop leaves on this error (as `for await` does).
        if (!closed) queue.push({ error });
        return;
      }
    }
    if (closed) return;
    try {
      queue.push({ handle: startCopy(batch, device, copyOptions) });
    } catch (error) {
      queue.push({ error });
    }
  };
  // One pump at a time pulls from the source, one `next()` after another,
  // until `depth` copies wait behind the batch in use. It runs while the
  // loop body works (its awaits let an async source produce meanwhile); the
  // loop takes each batch as soon as its copy was started, not once the
  // pump has filled the queue (a source may deliver its next batch only
  // after the loop took this one).
  let pumping = false;
  const refill = (): void => {
    if (pumping || exhausted || closed || queue.length >= depth) return;
    pumping = true;
    (async () => {
      try {
        while (!exhausted && !closed && queue.length < depth) {
          await pull();
          notify();
        }
      } finally {
        pumping = false;
        notify();
      }
    })();
  };
  let failed = false;
  try {
    while (true) {
      refill();
      // Empty and not pumping: the source is exhausted.
      while (queue.length === 0 && pumping) await changed();
      const head = queue.shift();
      if (head === undefined) return;
      if ("error" in head) throw head.error;
      // Keep `depth` copies in flight behind the one about to be used.
      refill();
      const result = await head.handle.get();
      previous = result;
      yield result;
      if (disposePrevious) disposeAll(previous);
      previous = undefined;
    }
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // From here on no copy starts, so the queue holds every copy left to
    // dispose. A pending pull is not awaited: it may settle only once the
    // source is closed, or never.
    closed = true;
    let closeFailed = false;
    let closeError: unknown;
    const fail = (error: unknown) => {
      closeFailed = true;
      closeError = error;
    };
    // Closing is started now and awaited last: the copies in flight and
    // the last result are disposed even when `return()` never settles.
    let closing: Promise<void> | undefined;
    try {
      if (!exhausted) closing = Promise.resolve(iterator.return?.()).then(() => {}, fail);
    } catch (error) {
      fail(error);
    }
    if (disposePrevious && previous !== undefined) disposeAll(previous);
    previous = undefined;
    for (const pending of queue) {
      if ("handle" in pending) {
        await pending.handle.get().then(disposeAll, () => {});
      }
    }
    queue.length = 0;
    await closing;
    // As `for ... of` does: the source's error on closing surfaces, unless
    // the loop is leaving on an error of its own. (Only a `finally` runs when
    // the consumer leaves the loop at a `yield`, so the throw is here.)
    // deno-lint-ignore no-unsafe-finally
    if (closeFailed && !failed) throw closeError;
  }
}
