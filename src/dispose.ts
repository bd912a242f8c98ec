/**
 * `disposeAll`: release every tensor in a nested structure.
 *
 * @module
 */

import type { After } from "./gpu/after.ts";
import { afterOption, type DisposeOptions, OrderedRelease } from "./gpu/ordered_release.ts";
import { type DisposalBatch, Tensor, tensorInternals } from "./tensor.ts";
import {
  ARRAY,
  arrayIndex,
  containerKind,
  MAP,
  NOT_A_CONTAINER,
  PLAIN_OBJECT,
  visitByKeys,
} from "./walk/containers.ts";
import { disposeByPlan } from "./walk/plan_cache.ts";
import { MAX_DEPTH } from "./walk/walk.ts";

/**
 * Disposes every {@linkcode Tensor} found in a nested structure of arrays,
 * plain objects and Maps (the containers `startCopy` walks). Other values
 * are left alone; cycles are tolerated. Each tensor reads as disposed at
 * once; the memory of the tensors goes back to its pools when the call
 * ends (a getter of the structure that runs meanwhile sees it still held).
 *
 * With `after` (a launch, a copy handle, or a stream), the memory is
 * reused only after that work, ordered on the GPU (see `Tensor.dispose`);
 * each device's copy stream is ordered once per call.
 *
 * @param value a tensor or a structure holding tensors
 * @param options `after`: work that still reads the tensors
 * @throws {TypeError} for an `after` that is no copy handle, work or stream
 *
 * @example Releasing a batch after use
 * ```ts
 * import { disposeAll, Tensor } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const batch = { boxes: Tensor.from(new Float32Array(4)), ids: [Tensor.from(new Int32Array(2))] };
 * disposeAll(batch);
 * assert.equal(batch.boxes.disposed, true);
 * assert.equal(batch.ids[0].disposed, true);
 * ```
 */
export function disposeAll(value: unknown, options?: DisposeOptions): void {
  const ownAfter = afterOption(options);
  if (ownAfter !== undefined) {
    const after = new OrderedRelease(ownAfter as After, "option after");
    disposeDeep(value, (tensor) => tensor.dispose({ after: after as never }));
    return;
  }
  // Called once per training step on the whole batch. A copy's result has
  // the structure of its input, whose compiled walk plan has a disposal
  // too: checks and loads inline, what does not match handed to the
  // recursion below. That plain recursion with an ancestor scan is several
  // times faster than a Set of visited containers; past MAX_DEPTH it gives
  // up, and the general walk at the end runs.
  //
  // Each tensor is marked disposed at once, as `dispose()` marks it (that
  // method itself is not called), and the holds of its storage are dropped
  // with those of its neighbours in one call (tensor.ts, `beginDisposal`),
  // when this call ends.
  const batch = tensorInternals.beginDisposal();
  try {
    const shallow = (item: unknown, depth: number, ancestors: object[]) =>
      disposeShallow(item, depth, ancestors, batch);
    const planned = disposeByPlan(value, shallow);
    const completed = planned ?? shallow(value, 0, []);
    if (!completed) disposeDeep(value, (tensor) => tensorInternals.disposeInBatch(tensor, batch));
  } finally {
    tensorInternals.endDisposal(batch);
  }
}

function disposeShallow(
  value: unknown,
  depth: number,
  ancestors: object[],
  batch: DisposalBatch,
): boolean {
  if (typeof value !== "object" || value === null) return true;
  if (value instanceof Tensor) {
    tensorInternals.disposeInBatch(value, batch);
    return true;
  }
  const kind = containerKind(value);
  if (kind === NOT_A_CONTAINER) return true;
  for (let d = 0; d < depth; d++) if (ancestors[d] === value) return true;
  if (depth >= MAX_DEPTH) return false;
  ancestors[depth] = value;
  if (kind === ARRAY) {
    const items = value as unknown[];
    if (visitByKeys(items)) {
      // Its indices only, as the walk copies them (not its named properties).
      for (const key of Object.keys(items)) {
        const i = arrayIndex(key);
        if (i >= 0 && !disposeShallow(items[i], depth + 1, ancestors, batch)) return false;
      }
    } else {
      for (let i = 0; i < items.length; i++) {
        if (!disposeShallow(items[i], depth + 1, ancestors, batch)) return false;
      }
    }
  } else if (kind === MAP) {
    for (const item of (value as Map<unknown, unknown>).values()) {
      if (!disposeShallow(item, depth + 1, ancestors, batch)) return false;
    }
  } else {
    const record = value as Record<string, unknown>;
    const names = Object.keys(record);
    for (let i = 0; i < names.length; i++) {
      if (!disposeShallow(record[names[i]], depth + 1, ancestors, batch)) return false;
    }
  }
  return true;
}

function disposeDeep(value: unknown, dispose = (tensor: Tensor) => tensor.dispose()): void {
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item instanceof Tensor) {
      dispose(item);
    } else if (typeof item === "object" && item !== null && !seen.has(item)) {
      seen.add(item);
      const kind = containerKind(item);
      if (kind === ARRAY) {
        const items = item as unknown[];
        if (visitByKeys(items)) {
          for (const key of Object.keys(items)) {
            const i = arrayIndex(key);
            if (i >= 0) stack.push(items[i]);
          }
        } else for (const child of items) stack.push(child);
      } else if (kind === MAP) {
        for (const child of (item as Map<unknown, unknown>).values()) stack.push(child);
      } else if (kind === PLAIN_OBJECT) {
        for (const key of Object.keys(item)) {
          stack.push((item as Record<string, unknown>)[key]);
        }
      }
    }
  }
}
