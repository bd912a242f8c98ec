/**
 * The pipeline behind `prefetch` (src/prefetch.ts, which checks the
 * arguments first): pulls batches from the source and keeps `depth` copies
 * in flight beyond the batch in use, yields their results in source order,
 * and, asked to, disposes each result once the next is taken. An error of
 * the source or of a copy surfaces at the step where its batch would have
 * been yielded; the copies still in flight are awaited and disposed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { prefetchBatches } from "./prefetch_pipeline.ts";
 * const open = () => ({ iterator: [[new Float32Array(2)]][Symbol.iterator](), sync: true });
 * const options = { device: "cpu", depth: 2, disposePrevious: true, copyOptions: {} };
 * let batches = 0;
 * for await (const [tensor] of prefetchBatches(open, options)) {
 *   assert.equal(tensor.device, "cpu");
 *   batches++;
 * }
 * assert.equal(batches, 1);
 * ```
 *
 * @module
 */

import { type AsyncCopyHandle, whenCopyQueued } from "./copy_handle.ts";
import { disposeAll } from "./dispose.ts";
import type { StartCopyOptions } from "./options.ts";
import { shown } from "./shown.ts";
import type { CopyResult } from "./copy_result.ts";
import { startCopy } from "./start_copy.ts";

type Pending<R> = { handle: AsyncCopyHandle<R> } | { error: unknown };

/**
 * An opened source. A sync iterator's values are awaited, as `for await`
 * does (an array of `Promise`s of batches is a source of batches).
 */
export interface PrefetchSource<T> {
  iterator: Iterator<T | PromiseLike<T>> | AsyncIterator<T>;
  sync: boolean;
}

/** What a prefetch was asked for: its device, depth, disposal and copy options. */
export interface PrefetchRun {
  device: string;
  depth: number;
  disposePrevious: boolean;
  copyOptions: StartCopyOptions;
}

/**
 * Yields the copies of `open()`'s batches in source order, keeping `depth`
 * in flight (see the module documentation).
 */
export async function* prefetchBatches<T>(
  open: () => PrefetchSource<T>,
  { device, depth, disposePrevious, copyOptions }: PrefetchRun,
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
      if (!("handle" in pending)) continue;
      const settled = pending.handle.get().then(disposeAll, () => {});
      // A copy not queued yet (one waiting for memory, which the batch the
      // body kept may be holding until the loop has left) is disposed once
      // it settles, not awaited: awaiting it hung the loop's exit until the
      // wait timed out, or for ever.
      if (whenCopyQueued(pending.handle) === undefined) await settled;
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
