/**
 * CPU → CUDA into an earlier result, in place (`startCopy`'s `into`
 * option): no containers, tensors or device memory made; the data's bytes
 * go where the result's tensors lie. The steps, one file each:
 *
 * 1. the result's record, made at the first copy into it (into/record.ts:
 *    its structure, its tensors grouped by the storage they lie in);
 * 2. the data read against it (into/leaves.ts: each leaf checked against
 *    the tensor it replaces, each group marked as one DMA from an arena or
 *    packed);
 * 3. who else holds the result's memory (into/holds.ts);
 * 4. the values passed through written, and the DMAs queued (into/submit.ts).
 *
 * Note [Writing into memory others may read]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A result's memory is written only where nothing else can see it: each
 * storage must have exactly the holds of the result's own tensors (all
 * live), of kernel launches in flight and of library copies in flight that
 * read it (reuse/holders.ts); any other hold (a tensor sharing the memory)
 * refuses the copy. Library copies run on the device's copy stream, so the
 * DMAs queued here follow them; launches run on other streams, so the copy
 * stream waits for each launch holding the memory on the GPU first (as
 * `after` orders a copy), and for `after`'s items. The copy holds each
 * storage until it settles.
 *
 * @module
 */

import { CPU } from "../device.ts";
import { type After, orderCopyAfter } from "../gpu/after.ts";
import type { ResolvedOptions } from "../options.ts";
import { resultEntry } from "../reuse/results.ts";
import type { AsyncCopyHandle } from "../copy_handle.ts";
import { checkHolds } from "./into/holds.ts";
import { readData } from "./into/leaves.ts";
import { buildRecord, type IntoRecord } from "./into/record.ts";
import { submitInto } from "./into/submit.ts";

/**
 * Starts copying `data` (CPU leaves) into `into`, a result of an earlier
 * copy to device `target`, in place (see `StartCopyOptions.into`).
 *
 * @throws {TypeError} where `data` does not match `into`, or for a CPU target
 * @throws {Error} where `into` cannot be written (Note [Writing into memory others may read])
 */
export function startCopyInto(
  data: unknown,
  target: number,
  options: ResolvedOptions,
  into: object,
  after: readonly After[] | undefined,
): AsyncCopyHandle<unknown> {
  if (target === CPU) {
    throw new TypeError(
      'Invalid option into: copies into an earlier result go to a CUDA device, got device "cpu"',
    );
  }
  const entry = resultEntry(into, target);
  if (entry.busy) {
    throw new Error(
      "Cannot copy into a result that a copy into it is still writing: await that copy's get() first",
    );
  }
  // Busy from the read on: a getter of the data (or a setter of the
  // result) that starts another copy into this result would share its
  // columns. `submitInto` keeps it busy until the copy settles.
  entry.busy = true;
  let record: IntoRecord;
  let passes: number;
  let works: ReturnType<typeof checkHolds>;
  let previous: readonly unknown[];
  try {
    record = (entry.record ??= buildRecord(into, target)) as IntoRecord;
    passes = readData(record, data, into);
    works = checkHolds(record.groups, record.shape.tensors, record.ungrouped);
    // The values passed through are written, all or none (a frozen or
    // read-only container of the result refuses its write), before the
    // copy is ordered after anything, so that a refused copy leaves no
    // wait behind it; an ordering that fails puts them back.
    previous = writePassedValues(record.columns, passes);
  } catch (error) {
    entry.busy = false;
    throw error;
  }
  if (passes > 0) {
    // The result's setters ran: one may have disposed a tensor of the
    // result, or taken its memory (a copy of it to its own device). Read
    // again (at the cost of the counters where nothing was disposed).
    try {
      works = checkHolds(record.groups, record.shape.tensors, record.ungrouped);
    } catch (error) {
      putBack(record.columns, previous, passes);
      entry.busy = false;
      throw error;
    }
  }
  const items = after === undefined && works.length === 0
    ? undefined
    : [...(after ?? []), ...works];
  let ordered: Promise<void> | undefined;
  try {
    ordered = items === undefined ? undefined : orderCopyAfter(items, [target]);
  } catch (error) {
    // Work it names failed already: the copy fails through get(), as when
    // that work fails a moment later (the values go back then).
    ordered = Promise.reject(error);
  }
  // From here the result is taken (but for a storage released since the
  // check, below). A copy that fails before it writes any tensor (its
  // staging: a leaf resized by a setter of the result, no pinned memory)
  // puts the values back too.
  try {
    return submitInto(
      record,
      entry,
      into,
      target,
      options,
      ordered,
      () => putBack(record.columns, previous, passes),
    );
  } catch (error) {
    // Thrown before the copy took the result (no hold, no handle).
    ordered?.catch(() => {});
    putBack(record.columns, previous, passes);
    entry.busy = false;
    throw error;
  }
}

/** The columns of the values a copy passes through (reuse/into_match.ts). */
interface PassedValues {
  passContainers: object[];
  passKeys: unknown[];
  passValues: unknown[];
}

const NOTHING_WRITTEN: readonly unknown[] = [];

/**
 * Writes the first `passes` values passed through into their containers
 * of the result and returns the values they replaced; where one refuses
 * (a frozen container, a read-only key, a setter that throws), puts back
 * the values written before it and throws, so that a refused copy leaves
 * the result as it was. (The replaced values are kept per call: a setter
 * of the result may start another copy into a result.)
 *
 * @throws {TypeError} naming the key that could not be written
 */
function writePassedValues(columns: PassedValues, passes: number): readonly unknown[] {
  if (passes === 0) return NOTHING_WRITTEN;
  const { passContainers, passKeys, passValues } = columns;
  const previous = new Array<unknown>(passes);
  let m = 0;
  try {
    for (; m < passes; m++) {
      previous[m] = readSlot(passContainers[m], passKeys[m]);
      writeSlot(passContainers[m], passKeys[m], passValues[m]);
    }
  } catch (error) {
    const key = passKeys[m];
    putBack(columns, previous, m);
    throw new TypeError(
      `Cannot copy into this result: its value at key ${
        typeof key === "string" ? JSON.stringify(key) : String(key)
      } cannot be written (${(error as Error).message}); nothing was written`,
    );
  }
  return previous;
}

/**
 * Puts the first `count` replaced values back, last first, as well as the
 * result lets it: a put-back that throws is skipped (the error the caller
 * sees is the one that made the copy fail).
 */
function putBack(columns: PassedValues, previous: readonly unknown[], count: number): void {
  for (let k = count - 1; k >= 0; k--) {
    try {
      writeSlot(columns.passContainers[k], columns.passKeys[k], previous[k]);
    } catch {
      // Skipped: see above.
    }
  }
}

/** A result container's value at `key` (a Map's entry, or a property). */
function readSlot(container: object, key: unknown): unknown {
  return container instanceof Map
    ? container.get(key)
    : (container as Record<PropertyKey, unknown>)[key as PropertyKey];
}

/** Sets a result container's value at `key` (a Map's entry, or a property). */
function writeSlot(container: object, key: unknown, value: unknown): void {
  if (container instanceof Map) container.set(key, value);
  else (container as Record<PropertyKey, unknown>)[key as PropertyKey] = value;
}
