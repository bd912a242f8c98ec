/**
 * Users' device code: loading a module off the main thread (with the JIT's
 * log on failure), finding its kernels, reading what the driver can tell of
 * a kernel's parameters and launch limits, and the launch itself (one call
 * that launches and records the work's event).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { LAUNCH_HEADER_BYTES } from "./kernel_modules.ts";
 * assert.equal(LAUNCH_HEADER_BYTES, 8 * 4); // eight uint32 before the arguments
 * ```
 *
 * @module
 */

import { CUDA_ERROR_NOT_SUPPORTED } from "./cuda_error.ts";
import { check, out, sym } from "./shim_call.ts";

/** How a module load ended: the module's handle, or a status and the JIT's log. */
export type ModuleLoad = { module: number } | { status: number; log: string };

/**
 * Loads a module (PTX text ending in a NUL byte, a cubin or a fat binary)
 * on `device`, on a Deno blocking-pool thread (the JIT may take a while).
 */
export async function moduleLoadOffThread(device: number, image: Uint8Array): Promise<ModuleLoad> {
  const handle = new Float64Array(1);
  const log = new Uint8Array(16 * 1024);
  const status = await sym().mtc_module_load_nonblocking(device, image, handle, log, log.length);
  if (status === 0) return { module: handle[0] };
  const end = log.indexOf(0);
  return { status, log: new TextDecoder().decode(log.subarray(0, end < 0 ? log.length : end)) };
}

/** Unloads a module from {@linkcode moduleLoadOffThread}. */
export function moduleUnload(device: number, module: number): void {
  check(sym().mtc_module_unload(device, module), () => `unload a module of cuda:${device}`);
}

/**
 * The kernel `name` of `module`; the status when the driver does not find
 * it (CUDA_ERROR_NOT_FOUND), as `{ status }`.
 */
export function moduleFunction(
  device: number,
  module: number,
  name: string,
): { function: number } | { status: number } {
  const status = sym().mtc_module_function(
    device,
    module,
    new TextEncoder().encode(name + "\0"),
    out,
  );
  return status === 0 ? { function: out[0] } : { status };
}

/**
 * The parameters of a kernel as its image declares them (offset and size
 * each), at most `max` of them, or `undefined` where the driver cannot tell
 * (before CUDA 12.4).
 */
export function functionParams(
  device: number,
  fn: number,
  max: number,
): { offset: number; size: number }[] | undefined {
  const info = new Float64Array(1 + 2 * max);
  const status = sym().mtc_function_params(device, fn, info, max);
  if (status === CUDA_ERROR_NOT_SUPPORTED) return undefined;
  check(status, () => `read the parameters of a kernel of cuda:${device}`);
  return Array.from({ length: info[0] }, (_, i) => ({
    offset: info[1 + 2 * i],
    size: info[2 + 2 * i],
  }));
}

/** Bytes before a launch buffer's arguments: eight uint32 (grid, block, shared, argument bytes). */
export const LAUNCH_HEADER_BYTES = 32;

/**
 * Launches `fn` on `stream` of `device` with the configuration and
 * arguments in `config` (see {@linkcode LAUNCH_HEADER_BYTES}), then records
 * `event` (0: none). Returns 0 or the CUDA status (never throws: the
 * caller releases what it took first).
 */
export function launch(
  device: number,
  fn: number,
  stream: number,
  event: number,
  config: Uint8Array,
): number {
  return sym().mtc_launch(device, fn, stream, event, config);
}

/** What a launch of a kernel may ask for (`cuFuncGetAttribute`). */
export interface FunctionLimits {
  /** Threads per block. */
  maxThreadsPerBlock: number;
  /** Bytes of dynamic shared memory per block. */
  maxDynamicSharedBytes: number;
}

/** The launch limits of kernel `fn` of `device`, or `undefined` where the driver cannot tell. */
export function functionLimits(device: number, fn: number): FunctionLimits | undefined {
  const limits = new Float64Array(3);
  const status = sym().mtc_function_limits(device, fn, limits);
  if (status === CUDA_ERROR_NOT_SUPPORTED) return undefined;
  check(status, () => `read the launch limits of a kernel of cuda:${device}`);
  return { maxThreadsPerBlock: limits[0], maxDynamicSharedBytes: limits[1] };
}
