/**
 * Who else holds a result's memory when a copy is about to write into it
 * (Note [Writing into memory others may read] in copy_into.ts): each of the
 * result's storages must have exactly the holds of the result's own tensors
 * (all live), of kernel launches in flight and of library copies in flight
 * that read it (reuse/holders.ts). The launches are returned for the copy
 * to wait for on the GPU; any other hold (a tensor sharing the memory)
 * refuses the copy, and so does a disposed tensor of the result whatever
 * the count: a disposed tensor's hold is gone, and another's (a tensor of
 * the user's over the same memory) would make the count come out right.
 *
 * @module
 */

import { reapFinished } from "../../copies_in_flight.ts";
import type { GpuWork } from "../../gpu/work.ts";
import { copiesReading, worksHolding } from "../../reuse/holders.ts";
import type { Group } from "./record.ts";

/**
 * Test switch: whether a copy into a result waits on the GPU for the
 * launches that hold its memory. Off only in the test that shows the race
 * it prevents (tests/gpu/copy_into_test.ts).
 */
export const intoOrdering = { afterHolders: true };

const NO_WORKS: GpuWork[] = [];

/**
 * The launches that hold the memory of `groups` (the result's storages,
 * with the positions of its `tensors` in each), for the copy to wait for.
 * Finished copies are settled first, so that their reads no longer count.
 *
 * @throws {Error} where a tensor of the result was disposed, or anything else holds its memory
 */
export function checkHolds(
  groups: readonly Group[],
  tensors: readonly { readonly disposed: boolean }[],
  ungrouped?: readonly number[],
): GpuWork[] {
  reapFinished();
  let works: GpuWork[] | undefined;
  // Every tensor read alive at the last check is alive still where no
  // tensor over its storage was disposed since: the 528 reads of a
  // reference batch are then none. The tensors without a storage (empty
  // ones, `ungrouped`; all of them where it is not given) are read each time.
  let unchecked = ungrouped === undefined;
  for (let g = 0; g < groups.length && !unchecked; g++) {
    unchecked = groups[g].storage.disposals !== groups[g].checkedDisposals;
  }
  if (unchecked) {
    for (let n = 0; n < tensors.length; n++) if (tensors[n].disposed) throw disposedTensor(n);
  } else {
    for (const n of ungrouped!) if (tensors[n].disposed) throw disposedTensor(n);
  }
  for (const group of groups) {
    const { storage, leaves } = group;
    const holding = worksHolding(storage);
    const expected = leaves.length + holding.length + copiesReading(storage);
    if (storage.holds !== expected) {
      throw new Error(
        `Cannot copy into this result: something else holds its memory (${
          storage.holds - expected
        } more hold${
          storage.holds - expected === 1 ? "" : "s"
        }: a tensor over the same memory: the result copied to its own device, a tensor that was on the target already and was shared into the result, tensors of the same copy left out of this value; or a copy waiting to read it); dispose it, or await that copy, first`,
      );
    }
    group.checkedDisposals = storage.disposals;
    if (holding.length > 0 && intoOrdering.afterHolders) {
      works ??= [];
      for (const work of holding) if (!works.includes(work)) works.push(work);
    }
  }
  return works ?? NO_WORKS;
}

function disposedTensor(n: number): Error {
  return new Error(
    `Cannot copy into this result: its tensor ${n} (in the walk's order) was disposed`,
  );
}
