/**
 * The memory limits: how much pinned and device memory the pools may hold,
 * how long a copy waits for memory under them, and when idle memory goes
 * back. Defaults, then environment variables (read only where already
 * granted, so that importing never prompts), then `setMemoryLimits()`.
 *
 * @module
 */

import { grantedEnv } from "../env.ts";

/** The limits of the library's memory pools; see {@linkcode setMemoryLimits}. */
export interface MemoryLimits {
  /** Pinned host memory the pool may hold, in bytes (default 4 GiB; `MTC_PINNED_LIMIT`). */
  pinnedBytes: number;
  /** Memory each device's pool may hold, in bytes (default 16 GiB; `MTC_DEVICE_LIMIT`). */
  deviceBytes: number;
  /**
   * Idle (cached) memory goes back to CUDA once a pool has not been used
   * for this long, in milliseconds (default 10000; `MTC_IDLE_RELEASE_MS`;
   * `Infinity`: never).
   */
  idleReleaseMs: number;
  /**
   * How long a copy that does not fit under a limit waits for memory to come
   * back before its `get()` rejects, in milliseconds (default 60000;
   * `MTC_MEMORY_WAIT_MS`). `Infinity` waits for ever: a copy then waits on
   * tensors the program may never dispose.
   */
  waitMs: number;
}

const GiB = 1024 ** 3;

/** The documented defaults. */
export const DEFAULT_MEMORY_LIMITS: Readonly<MemoryLimits> = Object.freeze({
  pinnedBytes: 4 * GiB,
  deviceBytes: 16 * GiB,
  idleReleaseMs: 10_000,
  waitMs: 60_000,
});

// Null prototype: only these own keys are limits ("toString" is not one).
const ENVIRONMENT: Readonly<Record<keyof MemoryLimits, string>> = Object.freeze(
  Object.assign(Object.create(null), {
    pinnedBytes: "MTC_PINNED_LIMIT",
    deviceBytes: "MTC_DEVICE_LIMIT",
    idleReleaseMs: "MTC_IDLE_RELEASE_MS",
    waitMs: "MTC_MEMORY_WAIT_MS",
  }),
);

const UNITS: Readonly<Record<string, number>> = Object.freeze(
  Object.assign(Object.create(null), {
    "": 1,
    k: 1e3,
    kb: 1e3,
    kib: 1024,
    m: 1e6,
    mb: 1e6,
    mib: 1024 ** 2,
    g: 1e9,
    gb: 1e9,
    gib: GiB,
  }),
);

/**
 * Parses a limit from the environment: a number of bytes or milliseconds,
 * with an optional size unit (`512MiB`, `4GiB`, `2g`), or `Infinity`.
 */
export function parseLimit(text: string, name: string): number {
  const match = /^\s*(\d+(?:\.\d+)?|infinity)\s*([a-z]*)\s*$/i.exec(text);
  const unit = match ? UNITS[match[2].toLowerCase()] : undefined;
  if (!match || unit === undefined) {
    throw new TypeError(
      `Invalid ${name}="${text}": expected a number, optionally with a unit (KiB, MiB, GiB), or Infinity`,
    );
  }
  const value = match[1].toLowerCase() === "infinity"
    ? Infinity
    : Math.floor(Number(match[1]) * unit);
  return checkLimit(value, name);
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  if (typeof value === "function") return "a function";
  return String(value);
}

function checkLimit(value: unknown, name: string): number {
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`Invalid ${name}: expected a number, got ${describe(value)}`);
  }
  if (value < 0 || (Number.isFinite(value) && !Number.isInteger(value))) {
    throw new RangeError(`Invalid ${name}: expected a whole number >= 0 or Infinity, got ${value}`);
  }
  return value;
}

let current: MemoryLimits | undefined;
// The errors of malformed variables, by limit, until setMemoryLimits sets
// it; and the first of them.
const environmentErrors = new Map<keyof MemoryLimits, Error>();
let environmentError: Error | undefined;
const listeners: (() => void)[] = [];

function fromEnvironment(): MemoryLimits {
  const limits = { ...DEFAULT_MEMORY_LIMITS };
  for (const key of Object.keys(ENVIRONMENT) as (keyof MemoryLimits)[]) {
    const text = grantedEnv(ENVIRONMENT[key]);
    if (text === undefined || text === "") continue;
    try {
      limits[key] = parseLimit(text, ENVIRONMENT[key]);
    } catch (error) {
      environmentErrors.set(key, error as Error);
      environmentError ??= error as Error;
    }
  }
  return limits;
}

/**
 * The limits in force (environment read on first use). Never throws: a
 * limit whose variable is malformed reads as its default here, and
 * {@linkcode memoryLimitsError} says why copies fail.
 */
export function memoryLimits(): Readonly<MemoryLimits> {
  return current ??= fromEnvironment();
}

/**
 * The error of a malformed `MTC_*` variable that no `setMemoryLimits` call
 * has overridden yet, or undefined. Copies throw it, so that a typo in a
 * variable never goes unnoticed.
 */
export function memoryLimitsError(): Error | undefined {
  memoryLimits();
  return environmentError;
}

/** Calls `listener` whenever the limits change (pools wake waiting copies). */
export function onLimitsChanged(listener: () => void): void {
  listeners.push(listener);
}

/**
 * Sets some of the memory limits for the rest of the process; the others
 * keep their values. Lowering a limit frees idle memory above it at once;
 * memory in use stays until its tensors are disposed or collected, and new
 * copies wait for it. Raising one lets waiting copies start.
 *
 * A copy that needs more than a limit can ever give (more than the limit
 * itself) rejects its `get()` at once, with a {@linkcode MemoryLimitError};
 * so does a copy waiting for memory when a limit is lowered below its need.
 * One that would fit once memory comes back waits up to `waitMs` for it,
 * then rejects with a `MemoryLimitError` too.
 *
 * The limits are this isolate's: the main thread and each Worker set their
 * own. A limit given here overrides its environment variable, even a
 * malformed one (which otherwise makes every copy throw its error).
 *
 * @param limits the limits to change (own properties only)
 * @returns the limits in force afterwards
 * @throws {TypeError} for a name that is not a limit, or a limit that is not a number
 * @throws {RangeError} for a negative or fractional limit
 *
 * @example A process that shares its GPU
 * ```ts
 * import assert from "node:assert/strict";
 * import { setMemoryLimits } from "@mtc/core";
 * const before = setMemoryLimits({});
 * const limits = setMemoryLimits({ deviceBytes: 2 * 1024 ** 3, idleReleaseMs: 1000 });
 * assert.equal(limits.deviceBytes, 2 * 1024 ** 3);
 * assert.equal(limits.idleReleaseMs, 1000);
 * setMemoryLimits(before);
 * ```
 */
export function setMemoryLimits(limits: Partial<MemoryLimits>): MemoryLimits {
  if (typeof limits !== "object" || limits === null) {
    throw new TypeError(`Invalid limits: expected an object, got ${describe(limits)}`);
  }
  const next = { ...memoryLimits() };
  const given: (keyof MemoryLimits)[] = [];
  for (const key of Object.keys(limits) as (keyof MemoryLimits)[]) {
    if (!Object.hasOwn(ENVIRONMENT, key)) {
      throw new TypeError(
        `Invalid memory limit "${key}": expected one of ${Object.keys(ENVIRONMENT).join(", ")}`,
      );
    }
    const value = limits[key];
    if (value === undefined) continue;
    next[key] = checkLimit(value, key);
    given.push(key);
  }
  current = next;
  for (const key of given) environmentErrors.delete(key);
  environmentError = environmentErrors.values().next().value;
  for (const listener of listeners) listener();
  return { ...next };
}
