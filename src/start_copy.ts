/**
 * `startCopy`: resolve the options, parse the device, walk the data into a
 * route, submit each direction's transfers, and hand back the handle.
 *
 * Everything that can be rejected is checked before any memory is taken or
 * any CUDA call is made (options, device, structure, leaves). The data path
 * itself lives in its rooms: `route.ts` (what moves where), `transfer/`
 * (one copy's ledger, chunk placement, one file per direction), `memory/`
 * and `staging/`; see docs/ARCHITECTURE.md.
 *
 * @module
 */

import { type AsyncCopyHandle, createCopyHandle } from "./copy_handle.ts";
import { reapFinished } from "./copies_in_flight.ts";
import type { CopyJob } from "./copy_job.ts";
import { DEBUG, logCopy, traceCopy } from "./debug.ts";
import { CPU, parseDevice } from "./device.ts";
import { checkAfter, orderCopyAfter } from "./gpu/after.ts";
import { intoOption, resolveOptions, type StartCopyOptions } from "./options.ts";
import { startCopyInto } from "./transfer/copy_into.ts";
import { Route } from "./route.ts";
import type { Storage } from "./memory/storage.ts";
import { type Tensor, tensorInternals } from "./tensor.ts";
import { walk } from "./walk/walk.ts";
import type { CopyResult } from "./copy_result.ts";
import { submit, submitAfter } from "./transfer/submit.ts";
import { pendingChunkStorage } from "./transfer/chunks.ts";
import { PACKED_STAGES } from "./transfer/admission.ts";

/**
 * Starts copying every tensor in `data` to `device`, asynchronously.
 *
 * Small CPU tensors are packed into pinned chunks and sent with one DMA per
 * chunk; larger ones are staged through pinned memory (in parallel, off the
 * main thread, when large); CUDA tensors going to the CPU are gathered on the
 * device and sent back with one DMA per chunk.
 *
 * Inputs must not be modified until `get()` resolves or `ready()` is true;
 * the handle keeps them alive until then.
 *
 * The result owns its tensors: a `Tensor` already on `device` is not copied,
 * but comes back as a new `Tensor` over the same memory that holds that
 * memory itself (so does a TypedArray copied to `"cpu"`). Disposing the
 * result never disposes an input, on any device, and the input may be
 * disposed first: the memory goes back once both are.
 *
 * @param data a TypedArray, a `Tensor`, or arrays, plain objects and Maps of
 * them (other values, class instances included, pass through by reference)
 * @param device `"cpu"`, `"cuda"` or `"cuda:N"` (required)
 * @param options see {@linkcode StartCopyOptions}
 * @returns a handle whose `get()` resolves with the copied structure (typed
 * as {@linkcode CopyResult})
 * @throws {TypeError} for a missing or malformed device, bad options, a
 * cyclic structure or a leaf over a detached buffer
 * @throws {RangeError} for `cuda:N` past the device count or an option out
 * of range
 * @throws {Error} for a CUDA target without a usable device, or a disposed
 * tensor leaf
 *
 * @example Copy a batch's meta-data, overlap other work, then consume it
 * ```ts
 * import { deviceCount, startCopy } from "@mtc/core";
 * import assert from "node:assert/strict";
 * const batch = [{ boxes: new Float32Array(8), classIds: new BigInt64Array(2) }];
 * const handle = startCopy(batch, deviceCount() > 0 ? "cuda:0" : "cpu");
 * // ... other work runs while the copy is in flight ...
 * const onDevice = await handle.get();
 * assert.deepEqual(onDevice[0].boxes.shape, [8]);
 * assert.equal(onDevice[0].classIds.dtype, "int64");
 * assert.equal(handle.stats().tensors, 2);
 * ```
 */
export function startCopy<T>(
  data: T,
  device: string,
  options?: StartCopyOptions,
): AsyncCopyHandle<CopyResult<T>> {
  const started = DEBUG ? performance.now() : 0;
  const resolved = resolveOptions(options);
  const target = parseDevice(device);
  // Own property only: an enumerable `after` on Object.prototype is not an option.
  const ownAfter = options !== undefined && options !== null && Object.hasOwn(options, "after")
    ? options.after
    : undefined;
  const after = ownAfter === undefined ? undefined : checkAfter(ownAfter, "option after", true);
  const into = options === undefined ? undefined : intoOption(options);
  if (into !== undefined) {
    return startCopyInto(data, target, resolved, into, after) as AsyncCopyHandle<CopyResult<T>>;
  }
  const route = new Route(target, resolved, pendingChunkStorage, PACKED_STAGES);
  let result: CopyResult<T>;
  try {
    result = walk(data, route) as CopyResult<T>;
  } catch (error) {
    // Leaves met before the failing one may hold storages already (and
    // the walk a pinned block it packed into).
    route.disposeShared();
    route.releasePackedBlock();
    throw error;
  }
  reapFinished();
  let ordered: Promise<void> | undefined;
  if (after !== undefined) {
    // Before anything is queued: the copy streams it will use wait on the GPU
    // (once what it names is queued: gpu/work.ts, "Work not queued yet").
    const devices = new Set([...route.d2hBySource().keys(), ...route.peerBySource().keys()]);
    // (A run a compiled walk took back from a device is in no list.)
    if (route.mirrorRun !== undefined) devices.add(route.mirrorRun.source);
    if (target !== CPU) devices.add(target);
    try {
      ordered = orderCopyAfter(after, devices);
    } catch (error) {
      // Work it names failed already (or a wait for it could not be
      // queued): the copy fails as it does when that work fails a moment
      // later, through get(), never by throwing here. (The copy's failure
      // gives back what it holds, outputs over inputs included.)
      ordered = Promise.reject(error);
    }
  }
  const trace = DEBUG ? traceCopy(route, started) : undefined;
  let job: CopyJob<void>;
  try {
    job = ordered ? submitAfter(route, ordered) : submit(route);
  } catch (error) {
    // Thrown before anything was queued (admission: a malformed MTC_*
    // memory variable): as above.
    route.disposeShared();
    route.releaseLists();
    throw error;
  }
  if (job.submitted !== undefined && !job.waitsForMemory) {
    holdOutputsUntilQueued(route.outputs, job.submitted);
  }
  if (trace) trace.submitted = performance.now();
  return createCopyHandle<CopyResult<T>>({
    ...job,
    outputs: result,
    complete: () => {
      try {
        job.complete();
      } catch (error) {
        route.disposeShared();
        throw error;
      }
      if (trace) logCopy(trace, job.stats);
      return result;
    },
    abort: (error?: unknown) => {
      job.abort();
      route.disposeShared();
      if (trace) logCopy(trace, job.stats, error ?? "aborted");
    },
  });
}

/**
 * Outputs staged in the background are written by transfers queued later,
 * and `outputs()` hands them out at once: one disposed meanwhile must not go
 * back to its pool (where a copy queued before those transfers would get
 * it) until they are queued.
 */
function holdOutputsUntilQueued(outputs: readonly Tensor[], queued: Promise<void>): void {
  const held: Storage[] = [];
  let last: Storage | undefined;
  for (const output of outputs) {
    const storage = tensorInternals.storage(output);
    if (storage === undefined || storage === last) continue;
    storage.retain();
    held.push(last = storage);
  }
  const release = () => {
    for (const storage of held) storage.release();
  };
  queued.then(release, release);
}
