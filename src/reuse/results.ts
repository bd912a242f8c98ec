/**
 * Which values are results that a copy may write into again (the `into`
 * option of `startCopy`): the results of CPU→CUDA copies whose tensors were
 * all made by the copy, registered when the copy completes.
 *
 * The registration is one WeakMap entry per such copy, keyed on the
 * result's root, holding the copy's list of outputs (which the result
 * holds anyway); what a copy into the result needs (its structure, its
 * storages, the compiled check) is built from it the first time, by
 * `transfer/copy_into.ts`, and kept here.
 *
 * @module
 */

import type { Tensor } from "../tensor.ts";

/** A registered result. */
export interface ResultEntry {
  /** The device index the copy wrote to. */
  readonly device: number;
  /** The copy's outputs, in the walk's order (the result's tensors). */
  readonly outputs: readonly Tensor[];
  /** What copies into the result need, built at the first one (copy_into.ts owns its type). */
  record: unknown;
  /** Whether a copy into the result is in flight. */
  busy: boolean;
}

const results = new WeakMap<object, ResultEntry>();

/**
 * Records `result` (the value a copy to device `device` resolves with) as
 * one copies may write into; `outputs` are its tensors in the walk's order,
 * all made by the copy.
 */
export function registerResult(result: object, device: number, outputs: readonly Tensor[]): void {
  results.set(result, { device, outputs, record: undefined, busy: false });
}

/** The registration of `value`, if it is a result copies may write into. */
export function resultEntry(value: object): ResultEntry | undefined {
  return results.get(value);
}
