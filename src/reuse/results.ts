/**
 * The results that copies write into (the `into` option of `startCopy`),
 * each with what those copies need: kept from the first copy into a result
 * on, keyed on the result's root (nothing is recorded for other copies: a
 * WeakMap entry per copy grew the process by 36 KB a copy in the soak test).
 *
 * @module
 */

/** A result copied into. */
export interface ResultEntry {
  /** The device index its tensors are on. */
  readonly device: number;
  /** What copies into the result need (copy_into.ts owns its type). */
  record: unknown;
  /** Whether a copy into the result is in flight. */
  busy: boolean;
}

const results = new WeakMap<object, ResultEntry>();

/** The entry of `result` as a result copied into on device `device` (made at the first copy). */
export function resultEntry(result: object, device: number): ResultEntry {
  let entry = results.get(result);
  if (entry === undefined || entry.device !== device) {
    entry = { device, record: undefined, busy: false };
    results.set(result, entry);
  }
  return entry;
}
