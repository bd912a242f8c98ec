/**
 * `StartCopyOptions`, their defaults and their validation.
 *
 * @module
 */

import type { After } from "./gpu/after.ts";

/** Options of `startCopy`. */
export interface StartCopyOptions {
  /**
   * Stage CPU↔CUDA transfers through pinned (page-locked) host memory, so
   * they are truly asynchronous; CUDA→CPU outputs are then pinned. Default
   * `true`. No effect on CPU→CPU or CUDA→CUDA.
   */
  usePinnedStaging?: boolean;
  /**
   * Pack CPU tensors of at most 256 KiB into shared chunks, one transfer
   * per chunk (and gather small CUDA tensors going to the CPU or to another
   * device on their device likewise). Default `true`.
   */
  packCpuTensors?: boolean;
  /** Minimum byte alignment of each packed tensor; integer >= 1, default 16. */
  minPackedAlignmentBytes?: number;
  /** Maximum payload of one packed chunk; integer >= 1, default 32 MiB. */
  maxPackedChunkBytes?: number;
  /**
   * Stage large tensors (1 MiB and more) off the main thread, in parallel
   * and pipelined with the DMA, so `startCopy` returns before they are
   * submitted. Small copies are staged inline even when set, because a
   * background round trip costs more than staging them (see
   * docs/ARCHITECTURE.md). Default `true`.
   */
  useBackgroundThread?: boolean;
  /**
   * Work the copy must run after, ordered on the GPU (the CPU does not
   * wait): a launch (e.g. copying a kernel's results back), a copy handle,
   * or everything queued on a stream so far; or an array of them. Where
   * that work fails (before or after this call), the copy fails with its
   * error: `get()` rejects.
   */
  after?: After | readonly After[];
  /**
   * An earlier result to copy into, in place: a structure that an earlier
   * `startCopy(...).get()` to the same CUDA device resolved with, and that
   * the caller is done with. The copy writes `data`'s bytes into that
   * result's tensors' memory and `get()` resolves with `into` itself (the
   * same containers, the same `Tensor` instances: nothing is allocated), so
   * that a training loop's repeated structure costs one pack and one DMA
   * per chunk, or, for a batch built in a `hostArena` at the offsets of the
   * last one, a single DMA from the arena.
   *
   * Rules:
   * - `data` must match `into` exactly: the same containers (arrays of the
   *   same lengths, plain objects with the same keys in the same order,
   *   Maps with the same keys), and at each leaf a TypedArray or CPU
   *   `Tensor` of the dtype and shape of the tensor it replaces; else a
   *   `TypeError` ("Invalid option into: expected …, got … at $.path"),
   *   with nothing written. Values that are passed through (strings,
   *   numbers, class instances) are written into `into`'s containers.
   * - CPU → CUDA only (a copy to `"cpu"` is refused with a `TypeError`),
   *   and only where nothing else can see the memory written: `into`'s
   *   tensors must be on `device`, none disposed, in memory the library
   *   owns, and nothing else may hold that memory (a tensor over the same
   *   memory: the result copied to its own device, a tensor that was on the
   *   target already and so was shared into the result, tensors of the same
   *   copy left out of `into`); else an `Error` ("Cannot copy into …").
   * - Ordered on the GPU: kernels launched on `into`'s tensors (which hold
   *   them until they complete) and copies still reading them run before
   *   the bytes are overwritten; the copy stream waits for them on the GPU,
   *   not the CPU. Your own FFI work on a stream of yours that reads them:
   *   pass that stream as `after`.
   * - One copy into a result at a time (a second one before the first
   *   settled throws an `Error`). If the copy fails, `get()` rejects with
   *   the `CudaError`; `into`'s contents are then unspecified, but its
   *   tensors stay valid and disposable as before.
   */
  into?: object;
}

/** Options with every default applied (`after` and `into` are read by `startCopy` itself). */
export type ResolvedOptions = Required<Omit<StartCopyOptions, "after" | "into">>;

const KNOWN = new Set([
  "usePinnedStaging",
  "packCpuTensors",
  "minPackedAlignmentBytes",
  "maxPackedChunkBytes",
  "useBackgroundThread",
  "after",
  "into",
]);

/**
 * Validates options and applies defaults.
 *
 * @throws {TypeError} for a non-object, an unknown key or a wrong type
 * @throws {RangeError} for a number out of range
 */
export function resolveOptions(options: StartCopyOptions | undefined): ResolvedOptions {
  if (options === undefined) return DEFAULTS;
  if (typeof options !== "object" || options === null) {
    throw new TypeError(`Invalid options: expected an object, got ${String(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.has(key)) {
      throw new TypeError(
        `Invalid option "${key}": expected one of ${[...KNOWN].join(", ")}`,
      );
    }
  }
  return {
    usePinnedStaging: flag(options, "usePinnedStaging"),
    packCpuTensors: flag(options, "packCpuTensors"),
    useBackgroundThread: flag(options, "useBackgroundThread"),
    minPackedAlignmentBytes: positiveInteger(options, "minPackedAlignmentBytes"),
    maxPackedChunkBytes: positiveInteger(options, "maxPackedChunkBytes"),
  };
}

const DEFAULTS: ResolvedOptions = Object.freeze({
  usePinnedStaging: true,
  packCpuTensors: true,
  minPackedAlignmentBytes: 16,
  maxPackedChunkBytes: 32 * 1024 * 1024,
  useBackgroundThread: true,
});

type FlagKey = "usePinnedStaging" | "packCpuTensors" | "useBackgroundThread";
type NumberKey = "minPackedAlignmentBytes" | "maxPackedChunkBytes";

/**
 * An own option only, as the keys are checked: one inherited (an enumerable
 * key someone put on `Object.prototype`) made every copy throw or change.
 */
function own<K extends keyof StartCopyOptions>(
  options: StartCopyOptions,
  key: K,
): StartCopyOptions[K] {
  return Object.hasOwn(options, key) ? options[key] : undefined;
}

function flag(options: StartCopyOptions, key: FlagKey): boolean {
  const value = own(options, key);
  if (value === undefined) return DEFAULTS[key];
  if (typeof value !== "boolean") {
    throw new TypeError(`Invalid option ${key}: expected a boolean, got ${String(value)}`);
  }
  return value;
}

function positiveInteger(options: StartCopyOptions, key: NumberKey): number {
  const value = own(options, key);
  if (value === undefined) return DEFAULTS[key];
  if (typeof value !== "number") {
    throw new TypeError(`Invalid option ${key}: expected a number, got ${String(value)}`);
  }
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(
      `Invalid option ${key}: expected an integer from 1 to 2^53-1, got ${value}`,
    );
  }
  return value;
}

/**
 * The `into` option (an own property only, as for the others): undefined
 * where there is none.
 *
 * @throws {TypeError} for a value that cannot be a result: not an object
 */
export function intoOption(options: StartCopyOptions | undefined): object | undefined {
  if (options === undefined || options === null || !Object.hasOwn(options, "into")) {
    return undefined;
  }
  const into: unknown = options.into;
  if (into === undefined) return undefined;
  if (typeof into !== "object" || into === null) {
    throw new TypeError(
      `Invalid option into: expected an earlier result of startCopy(...).get(), got ${
        typeof into === "string" ? JSON.stringify(into) : String(into)
      }`,
    );
  }
  return into;
}
