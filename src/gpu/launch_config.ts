/**
 * `LaunchConfig`: how a kernel is launched (grid, block, dynamic shared
 * memory, arguments, stream, `after`), and the checks of its grid, block
 * and shared memory against the limits of the device and of the kernel,
 * written into the launch buffer's header.
 *
 * Its own file because these checks are the launch's contract with the
 * driver: a configuration the driver would refuse is a `RangeError` naming
 * the argument before any CUDA call, testable without a GPU.
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";
import { describe } from "./arguments.ts";
import type { After } from "./after.ts";
import type { CudaStream } from "./stream.ts";

/**
 * Grid or block dimensions: `x`, or `[x, y?, z?]`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { Dim3 } from "@mtc/core";
 * const grid: Dim3 = [64, 2];
 * const block: Dim3 = 256;
 * assert.equal(typeof block, "number");
 * assert.equal(grid.length, 2);
 * ```
 */
export type Dim3 = number | readonly [number, number?, number?];

/**
 * How to launch a kernel (see `Kernel.launch`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { LaunchConfig } from "@mtc/core";
 * const config: LaunchConfig = { grid: 1, block: [32, 4], args: [7, 1.5] };
 * assert.equal(config.sharedBytes, undefined); // 0 bytes
 * ```
 */
export interface LaunchConfig {
  /** Blocks in the grid: `x` or `[x, y, z]` (each an integer >= 1). */
  grid: Dim3;
  /** Threads per block: `x` or `[x, y, z]` (each an integer >= 1). */
  block: Dim3;
  /** Dynamic shared memory per block, in bytes (default 0). */
  sharedBytes?: number;
  /** One argument per parameter, checked against its declared type. */
  args: readonly (Tensor | number | bigint)[];
  /** The stream to queue it on (default: the device's default compute stream). */
  stream?: CudaStream;
  /** Work the kernel must run after, ordered on the GPU (no CPU wait). */
  after?: After | readonly After[];
}

/** What a kernel allows per launch, as the driver gives it (`cuFuncGetAttribute`). */
export interface KernelLimits {
  /** Threads per block at most. */
  readonly maxThreads: number;
  /** Dynamic shared memory per block at most, in bytes. */
  readonly maxSharedBytes: number;
}

const KNOWN = new Set(["grid", "block", "sharedBytes", "args", "stream", "after"]);

/** Grid and block dimensions at most, x y z (the device limits of every GPU CUDA runs on). */
const MAX_GRID = [0x7fffffff, 65535, 65535];
const MAX_BLOCK = [1024, 1024, 64];

/**
 * Checks that `config` is an object with no key but the options'.
 *
 * @throws {TypeError} for no object, or an unknown option
 */
export function checkConfigKeys(config: unknown): asserts config is LaunchConfig {
  if (typeof config !== "object" || config === null) {
    throw new TypeError(`Invalid config: expected an object, got ${describe(config)}`);
  }
  // Own keys, as startCopy reads its options: an enumerable key someone
  // put on Object.prototype made every launch throw.
  for (const key of Object.keys(config)) {
    if (!KNOWN.has(key)) {
      throw new TypeError(
        `Invalid config option "${key}": expected one of ${[...KNOWN].join(", ")}`,
      );
    }
  }
}

/**
 * Checks grid, block and sharedBytes of `config` against the device's
 * limits and `limits` (of the kernel called `what`), and writes them into
 * the first seven of `header`.
 *
 * @throws {TypeError} for a grid or block that is no number or [x, y?, z?]
 * @throws {RangeError} for dimensions, threads per block or shared bytes
 * out of range
 */
export function writeLaunchHeader(
  config: LaunchConfig,
  header: Uint32Array,
  limits: KernelLimits,
  what: string,
): void {
  writeDim3(header, 0, own(config, "grid"), "grid", MAX_GRID);
  writeDim3(header, 3, own(config, "block"), "block", MAX_BLOCK);
  const threads = header[3] * header[4] * header[5];
  if (threads > limits.maxThreads) {
    throw new RangeError(
      `Invalid block: expected at most ${limits.maxThreads} threads per block for ${what}, got ${threads}`,
    );
  }
  const shared = own(config, "sharedBytes") ?? 0;
  if (!Number.isInteger(shared) || shared < 0 || shared > limits.maxSharedBytes) {
    throw new RangeError(
      `Invalid sharedBytes: expected an integer from 0 to ${limits.maxSharedBytes} (the dynamic shared memory ${what} can have), got ${
        describe(shared)
      }`,
    );
  }
  header[6] = shared;
}

function writeDim3(
  into: Uint32Array,
  at: number,
  value: unknown,
  what: string,
  maxima: readonly number[],
): void {
  const dims = typeof value === "number" ? [value] : value;
  if (!Array.isArray(dims) || dims.length < 1 || dims.length > 3) {
    throw new TypeError(
      `Invalid ${what}: expected a number or [x, y?, z?], got ${describe(value)}`,
    );
  }
  for (let d = 0; d < 3; d++) {
    const n = dims[d] ?? 1;
    const max = maxima[d];
    if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > max) {
      throw new RangeError(
        `Invalid ${what}${
          typeof value === "number" ? "" : `[${d}]`
        }: expected an integer from 1 to ${max}, got ${describe(n)}`,
      );
    }
    into[at + d] = n;
  }
}

/**
 * A launch config's own value of `key` (the keys were checked), without
 * allocating: an inherited grid is no grid.
 */
export function own<K extends keyof LaunchConfig>(
  config: LaunchConfig,
  key: K,
): LaunchConfig[K] {
  return Object.hasOwn(config, key) ? config[key] : undefined as LaunchConfig[K];
}
