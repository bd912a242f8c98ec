/**
 * `MTC_DEBUG=1`: one line per copy on stderr, saying what it did and how
 * long it took to submit and to complete.
 *
 * @module
 */

import type { CopyStats } from "./copy_job.ts";
import { deviceName } from "./device.ts";
import { grantedEnv } from "./env.ts";
import type { Route } from "./route.ts";

/** Whether copies are logged (read once, at import). */
export const DEBUG: boolean = grantedEnv("MTC_DEBUG") === "1";

/** What a copy's log line needs from its start. */
export interface CopyTrace {
  directions: string;
  staging: string;
  started: number;
  submitted: number;
}

/** Notes the route's directions and staging path (before submission returns its lists). */
export function traceCopy(route: Route, started: number): CopyTrace {
  const target = deviceName(route.target);
  const directions: string[] = [];
  // (What a compiled walk packed or took from an arena is in no CPU→CUDA list.)
  const fromCpu = route.h2d.length > 0 || route.fromArena.length > 0 ||
    route.packedChunk !== undefined;
  if (fromCpu) directions.push(`cpu→${target}`);
  for (const source of route.peerBySource().keys()) {
    directions.push(`${deviceName(source)}→${target}`);
  }
  const back = new Set(route.d2hBySource().keys());
  if (route.mirrorRun !== undefined) back.add(route.mirrorRun.source);
  for (const source of back) directions.push(`${deviceName(source)}→cpu`);
  const { usePinnedStaging, useBackgroundThread } = route.options;
  return {
    directions: directions.join(", ") || `nothing to move (to ${target})`,
    staging: !usePinnedStaging
      ? "pageable"
      : useBackgroundThread
      ? "pinned, large tensors in the background"
      : "pinned, inline",
    started,
    submitted: performance.now(),
  };
}

/** Writes the copy's line: what it did, and submit and complete times in µs. */
export function logCopy(trace: CopyTrace, stats: CopyStats, failure?: unknown): void {
  const now = performance.now();
  const us = (ms: number) => `${(ms * 1000).toFixed(1)} µs`;
  const outcome = failure === undefined
    ? `completed after ${us(now - trace.submitted)}`
    : `FAILED after ${us(now - trace.submitted)}: ${
      failure instanceof Error ? failure.message : String(failure)
    }`;
  console.error(
    `@mtc/core: copy ${trace.directions}: ${stats.tensors} tensors, ${stats.bytes} bytes, ` +
      `${stats.packedTensors} packed in ${stats.chunks} chunk(s), ${stats.copies} transfer(s), ` +
      `staging ${trace.staging}; submitted in ${us(trace.submitted - trace.started)}, ${outcome}`,
  );
}
