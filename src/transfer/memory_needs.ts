/**
 * What a copy needs of the memory pools before it may start (admission.ts
 * decides when it may): the target device's pool holds the outputs
 * (CPU→CUDA and CUDA→CUDA), the pinned pool the staging of small pageable
 * inputs and the outputs of CUDA→CPU.
 *
 * @module
 */

import { CPU, deviceName } from "../device.ts";
import type { BlockPool } from "../memory/block_pool.ts";
import { MemoryLimitError } from "../memory/limit_error.ts";
import type { ResolvedOptions } from "../options.ts";
import type { Route } from "../route.ts";
import { BACKGROUND_MIN_BYTES } from "../staging/background.ts";
import { Tensor } from "../tensor.ts";

/** What admission reads of a {@linkcode Route} (tests give a stand-in). */
export interface AdmittedRoute {
  /** See {@linkcode Route.target}. */
  readonly target: number;
  /** See {@linkcode Route.movedBytes}. */
  readonly movedBytes: number;
  /** The options that decide whether small pageable inputs are staged. */
  readonly options: Pick<ResolvedOptions, "usePinnedStaging" | "useBackgroundThread">;
  /** See {@linkcode Route.h2d}. */
  readonly h2d: Route["h2d"];
  /** See {@linkcode Route.leaves}. */
  readonly leaves: Route["leaves"];
}

/** What admission reads of a pool. */
export type AdmittedPool = Pick<
  BlockPool,
  "reservedBytes" | "inUseBytes" | "limitBytes" | "makeRoom"
>;

/** What a copy needs of one pool. */
export interface Need {
  pool: AdmittedPool;
  bytes: number;
  /** `pinned` or the device name, for errors. */
  memory: string;
  /** The environment variable that sets the limit, for errors. */
  variable: string;
}

/** Pinned staging the CPU→CUDA leaves need (small pageable ones only; arena leaves none). */
function pinnedStagingBytes(route: AdmittedRoute): number {
  const { usePinnedStaging, useBackgroundThread } = route.options;
  if (!usePinnedStaging) return 0;
  const h2d = route.h2d.view();
  let bytes = 0;
  for (let k = 0; k < h2d.length; k++) {
    const leaf = route.leaves[h2d[k]];
    if (leaf instanceof Tensor && leaf.pinned) continue;
    if (useBackgroundThread && leaf.byteLength >= BACKGROUND_MIN_BYTES) continue;
    bytes += leaf.byteLength;
  }
  return bytes;
}

/** The error of a copy whose `need` does not fit (after `waitedMs`, if it waited). */
export function limitError(need: Need, waitedMs?: number): MemoryLimitError {
  return new MemoryLimitError({
    memory: need.memory,
    neededBytes: need.bytes,
    limitBytes: need.pool.limitBytes,
    inUseBytes: need.pool.inUseBytes,
    waitedMs,
    variable: need.variable,
  });
}

/** What `route`'s copy needs of the pinned pool and of its target's pool. */
export function needsOf(
  route: AdmittedRoute,
  pinnedPool: AdmittedPool,
  devicePool: (device: number) => AdmittedPool,
): Need[] {
  const pinned = { pool: pinnedPool, memory: "pinned", variable: "MTC_PINNED_LIMIT" };
  if (route.target === CPU) return [{ ...pinned, bytes: route.movedBytes }];
  return [
    {
      pool: devicePool(route.target),
      bytes: route.movedBytes,
      memory: deviceName(route.target),
      variable: "MTC_DEVICE_LIMIT",
    },
    { ...pinned, bytes: pinnedStagingBytes(route) },
  ];
}
