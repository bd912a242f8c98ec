/**
 * `prefetch`: keep the next batches' copies in flight while the current one
 * is used, the loop helper every training script would otherwise write.
 *
 * @module
 */

import { disposeAll } from "./dispose.ts";
import { parseDevice } from "./device.ts";
import { resolveOptions, type StartCopyOptions } from "./options.ts";
import type { AsyncCopyHandle } from "./copy_handle.ts";
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
 * exception) cancels cleanly: the source is closed (its `return()`), and the
 * copies in flight are awaited and their results disposed.
 *
 * @param source batches: an `Iterable` or an `AsyncIterable`
 * @param device `"cpu"`, `"cuda"` or `"cuda:N"`
 * @param options `startCopy`'s options, `depth` and `disposePrevious`
 * @returns an async iterator of the copied batches, in source order
 * @throws {TypeError} at once, for a malformed device or bad options
 * @throws {RangeError} at once, for a `depth` that is not an integer >= 1,
 * or a device or option out of range
 *
 * @example Feed a training loop
 * ```ts
 * import { deviceCount, prefetch } from "@mtc/core";
 * async function* batches() {
 *   for (let step = 0; step < 4; step++) yield { boxes: new Float32Array(8).fill(step) };
 * }
 * const device = deviceCount() > 0 ? "cuda:0" : "cpu";
 * let steps = 0;
 * for await (const batch of prefetch(batches(), device, { disposePrevious: true })) {
 *   console.assert(batch.boxes.device === device);
 *   steps++;
 * }
 * console.assert(steps === 4);
 * ```
 */
export function prefetch<T>(
  source: Iterable<T> | AsyncIterable<T>,
  device: string,
  options: PrefetchOptions = {},
): AsyncGenerator<CopyResult<T>, void, undefined> {
  const { depth = 2, disposePrevious = false, ...copyOptions } = options;
  if (!Number.isSafeInteger(depth) || depth < 1) {
    throw new RangeError(`Invalid prefetch depth ${String(depth)}: expected an integer >= 1`);
  }
  if (typeof disposePrevious !== "boolean") {
    throw new TypeError(`Invalid disposePrevious ${String(disposePrevious)}: expected a boolean`);
  }
  // Reject what startCopy would reject for every batch now, not at the first step.
  resolveOptions(copyOptions);
  parseDevice(device);
  const iterator = Symbol.asyncIterator in source
    ? (source as AsyncIterable<T>)[Symbol.asyncIterator]()
    : (source as Iterable<T>)[Symbol.iterator]();
  return run(iterator, { device, depth, disposePrevious, copyOptions });
}

interface Run {
  device: string;
  depth: number;
  disposePrevious: boolean;
  copyOptions: StartCopyOptions;
}

async function* run<T>(
  iterator: Iterator<T> | AsyncIterator<T>,
  { device, depth, disposePrevious, copyOptions }: Run,
): AsyncGenerator<CopyResult<T>, void, undefined> {
  const queue: Pending<CopyResult<T>>[] = [];
  let exhausted = false;
  let previous: CopyResult<T> | undefined;
  const pull = async (): Promise<void> => {
    let next: IteratorResult<T>;
    try {
      next = await iterator.next();
    } catch (error) {
      exhausted = true;
      queue.push({ error });
      return;
    }
    if (next.done) {
      exhausted = true;
      return;
    }
    try {
      queue.push({ handle: startCopy(next.value, device, copyOptions) });
    } catch (error) {
      queue.push({ error });
    }
  };
  const fill = async (): Promise<void> => {
    while (!exhausted && queue.length < depth) await pull();
  };
  // The refill runs while the loop body works on the batch just yielded
  // (its awaits let an async source produce the next batches meanwhile);
  // the next step waits for it before taking its batch.
  let filling = fill();
  try {
    while (true) {
      await filling;
      const head = queue.shift();
      if (head === undefined) return;
      if ("error" in head) throw head.error;
      // Keep `depth` copies in flight behind the one about to be used.
      filling = fill();
      const result = await head.handle.get();
      previous = result;
      yield result;
      if (disposePrevious) disposeAll(previous);
      previous = undefined;
    }
  } finally {
    await filling;
    if (!exhausted) await iterator.return?.();
    for (const pending of queue) {
      if ("handle" in pending) {
        await pending.handle.get().then(disposeAll, () => {});
      }
    }
    if (disposePrevious && previous !== undefined) disposeAll(previous);
  }
}
