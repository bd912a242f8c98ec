/**
 * `MemoryLimitError`: a copy that the memory limits kept from starting.
 *
 * @module
 */

import { shown } from "../shown.ts";

/** What a {@linkcode MemoryLimitError} reports. */
export interface MemoryLimitErrorOptions {
  /** The memory that did not fit: `"pinned"` or a device name (`"cuda:0"`). */
  memory: string;
  /** About how many bytes of it the copy needs (estimated from its payload). */
  neededBytes: number;
  /** The limit in force, in bytes. */
  limitBytes: number;
  /** Bytes of it held by this isolate's live tensors and copies in flight. */
  inUseBytes: number;
  /** How long the copy waited, in ms; absent when it could never fit. */
  waitedMs?: number;
  /** The environment variable that sets the limit (`MTC_DEVICE_LIMIT`), for the message. */
  variable: string;
}

/**
 * A copy could not start under the memory limits (see `setMemoryLimits`):
 * it needs more than the limit itself (then `waitedMs` is undefined and it
 * rejects at once, also when a limit is lowered below the need of a copy
 * that waits), or it waited `waitMs` for memory that live tensors kept. The
 * handle's `get()` rejects with it; nothing of the copy stays held.
 *
 * @example Telling a limit apart from a CUDA failure
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount, MemoryLimitError, setMemoryLimits, startCopy } from "@mtc/core";
 * if (deviceCount() > 0) {
 *   const before = setMemoryLimits({});
 *   setMemoryLimits({ deviceBytes: 1024 });
 *   try {
 *     await assert.rejects(startCopy([new Uint8Array(4096)], "cuda:0").get(), (error) => {
 *       assert.ok(error instanceof MemoryLimitError);
 *       assert.equal(error.memory, "cuda:0");
 *       assert.equal(error.waitedMs, undefined); // it could never fit
 *       return true;
 *     });
 *   } finally {
 *     setMemoryLimits(before);
 *   }
 * }
 * ```
 */
export class MemoryLimitError extends Error {
  /** The memory that did not fit: `"pinned"` or a device name (`"cuda:0"`). */
  readonly memory: string;
  /** About how many bytes of it the copy needs. */
  readonly neededBytes: number;
  /** The limit in force, in bytes. */
  readonly limitBytes: number;
  /** Bytes of it held by this isolate's live tensors and copies in flight. */
  readonly inUseBytes: number;
  /** How long the copy waited, in ms; undefined when it could never fit. */
  readonly waitedMs: number | undefined;

  /**
   * Creates the error; the library throws it, users only catch it.
   *
   * @throws {TypeError} for options that are not an object
   */
  constructor(options: MemoryLimitErrorOptions) {
    if (typeof options !== "object" || options === null) {
      throw new TypeError(
        `Invalid MemoryLimitError options: expected an object, got ${shown(options)}`,
      );
    }
    const { memory, neededBytes, limitBytes, inUseBytes, waitedMs, variable } = options;
    const raise = `raise the limit (${variable} or setMemoryLimits)`;
    super(
      waitedMs === undefined
        ? `Cannot start the copy: it needs about ${neededBytes} bytes of ${memory} memory, ` +
          `more than the memory limit of ${limitBytes} bytes; ${raise} or copy the structure in parts`
        : `Cannot start the copy: it waited ${waitedMs} ms for ${neededBytes} bytes of ${memory} ` +
          `memory under the memory limit of ${limitBytes} bytes, while ${inUseBytes} bytes are ` +
          `in use by live tensors and copies. Dispose results you no longer need, or ${raise}`,
    );
    this.name = "MemoryLimitError";
    this.memory = memory;
    this.neededBytes = neededBytes;
    this.limitBytes = limitBytes;
    this.inUseBytes = inUseBytes;
    this.waitedMs = waitedMs;
  }
}
