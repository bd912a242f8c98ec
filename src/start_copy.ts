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

import { AsyncCopyHandle, reapFinished } from "./copy_handle.ts";
import { DEBUG, logCopy, traceCopy } from "./debug.ts";
import { CPU, parseDevice } from "./device.ts";
import type { TypedArray } from "./dtype.ts";
import { checkAfter, orderCopyAfter } from "./gpu/after.ts";
import { resolveOptions, type StartCopyOptions } from "./options.ts";
import { Route } from "./route.ts";
import type { Storage } from "./memory/storage.ts";
import type { Tensor } from "./tensor.ts";
import { tensorStorage } from "./tensor_internals.ts";
import { walk } from "./traverse.ts";
import { submit, submitAfter } from "./transfer/submit.ts";

/** Objects `startCopy` passes through by reference, whatever their contents (for {@linkcode CopyResult}). */
export type OpaqueObject =
  | Date
  | RegExp
  | ArrayBuffer
  | SharedArrayBuffer
  | DataView
  | Promise<unknown>
  | ReadonlySet<unknown>
  | WeakMap<object, unknown>
  | WeakSet<object>
  | Error
  | ((...args: never[]) => unknown);

/**
 * Whether `T` has methods: the type of a class instance, which `startCopy`
 * passes through (at run time only plain objects are walked; a type cannot
 * say which objects are plain, and data interfaces have no methods).
 */
export type HasMethods<T> = {
  [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never;
}[keyof T] extends never ? false : true;

/**
 * The result type of copying a `T`: every TypedArray or Tensor leaf becomes
 * a `Tensor`; arrays, tuples, plain objects (types and interfaces) and Maps
 * keep their shape; other objects (class instances, `Date`, ...) and
 * primitives pass through as they are.
 *
 * @example Typing a batch with an interface
 * ```ts
 * import { type CopyResult, startCopy, type Tensor } from "@mtc/core";
 * interface Sample { boxes: Float32Array; name: string }
 * const batch: Sample[] = [{ boxes: new Float32Array(4), name: "a" }];
 * const copied: CopyResult<Sample[]> = await startCopy(batch, "cpu").get();
 * const boxes: Tensor = copied[0].boxes;
 * console.assert(boxes.numel === 4 && copied[0].name === "a");
 * ```
 */
export type CopyResult<T> = T extends Tensor | TypedArray ? Tensor
  : T extends OpaqueObject ? T
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, CopyResult<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: CopyResult<T[I]> }
  : T extends object ? HasMethods<T> extends true ? T
    : { [K in keyof T as K extends symbol ? never : K]: CopyResult<T[K]> }
  : T;

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
 * @param data a TypedArray, a `Tensor`, or arrays, plain objects and Maps of
 * them (other values pass through by reference)
 * @param device `"cpu"`, `"cuda"` or `"cuda:N"`
 * @param options see {@linkcode StartCopyOptions}
 * @returns a handle whose `get()` resolves with the copied structure
 * @throws {TypeError} for a malformed device, bad options, a cyclic
 * structure or a leaf over a detached buffer
 * @throws {RangeError} for `cuda:N` past the device count or an option out
 * of range
 * @throws {Error} for a CUDA target without a usable device, or a disposed
 * tensor leaf
 *
 * @example Copy a batch's meta-data, overlap other work, then consume it
 * ```ts
 * import { deviceCount, startCopy } from "@mtc/core";
 * const batch = [{ boxes: new Float32Array(8), classIds: new BigInt64Array(2) }];
 * const handle = startCopy(batch, deviceCount() > 0 ? "cuda:0" : "cpu");
 * // ... other work runs while the copy is in flight ...
 * const onDevice = await handle.get();
 * console.assert(onDevice[0].boxes.shape[0] === 8);
 * console.assert(handle.stats().tensors === 2);
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
  const after = options?.after === undefined
    ? undefined
    : checkAfter(options.after, "option after", true);
  const route = new Route(target, resolved);
  const result = walk(data, route) as CopyResult<T>;
  reapFinished();
  let ordered: Promise<void> | undefined;
  if (after !== undefined) {
    // Before anything is queued: the copy streams it will use wait on the GPU
    // (once what it names is queued: gpu/work.ts, "Work not queued yet").
    const devices = new Set([...route.d2hBySource().keys(), ...route.peerBySource().keys()]);
    if (target !== CPU) devices.add(target);
    try {
      ordered = orderCopyAfter(after, devices);
    } catch (error) {
      route.releaseLists();
      throw error;
    }
  }
  const trace = DEBUG ? traceCopy(route, started) : undefined;
  const job = ordered ? submitAfter(route, ordered) : submit(route);
  if (job.submitted !== undefined && !job.waitsForMemory) {
    holdOutputsUntilQueued(route.outputs, job.submitted);
  }
  if (trace) trace.submitted = performance.now();
  return new AsyncCopyHandle<CopyResult<T>>({
    ...job,
    outputs: result,
    complete: () => {
      job.complete();
      if (trace) logCopy(trace, job.stats);
      return result;
    },
    abort: (error?: unknown) => {
      job.abort();
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
    const storage = tensorStorage(output);
    if (storage === undefined || storage === last) continue;
    storage.retain();
    held.push(last = storage);
  }
  const release = () => {
    for (const storage of held) storage.release();
  };
  queued.then(release, release);
}
