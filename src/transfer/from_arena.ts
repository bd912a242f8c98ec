/**
 * CPU → CUDA for tensors that lie in a host arena: no staging, no packing
 * copy. The leaves of each arena are sorted by offset and cut into runs of
 * neighbours (gaps up to {@linkcode MAX_RUN_GAP} bytes, each output at an
 * offset that keeps its packed alignment, none overlapping); each run is one
 * device block and one DMA from the arena's pinned memory. The copy holds
 * the arena until it settles, so the arena cannot be reset or freed while
 * the DMA reads it.
 *
 * @module
 */

import { copyAsync } from "../../ffi/native.ts";
import type { ArenaMemory } from "../arena_index.ts";
import { elementSizeOf } from "../dtype.ts";
import { devicePool } from "../memory/device_memory.ts";
import { Storage } from "../memory/storage.ts";
import { effectiveAlignment } from "../pack_plan.ts";
import type { Route } from "../route.ts";
import type { Submission } from "./submission.ts";

/** Bytes of unrelated arena data a run may carry along rather than split. */
export const MAX_RUN_GAP = 4096;

/** Queues every arena leaf of `route`. */
export function arenaToDevice(route: Route, submission: Submission): void {
  submission.involve(route.target);
  const groups = new Map<ArenaMemory, number[]>();
  route.fromArena.forEach((index, k) => {
    const arena = route.arenas[k];
    let list = groups.get(arena);
    if (!list) {
      groups.set(arena, list = []);
      submission.holdArena(arena);
    }
    list.push(index);
  });
  for (const [arena, indices] of groups) sendRuns(route, submission, arena, indices);
}

function sendRuns(route: Route, submission: Submission, arena: ArenaMemory, indices: number[]) {
  const { options, outputs } = route;
  const offsets = new Map<number, number>();
  for (const i of indices) offsets.set(i, route.hostOffset(i));
  indices.sort((a, b) => offsets.get(a)! - offsets.get(b)!);
  let members: number[] = [];
  let start = 0;
  let end = 0;
  const flush = () => {
    if (members.length > 0) sendRun(route, submission, { arena, members, offsets, start, end });
    members = [];
  };
  for (const i of indices) {
    const offset = offsets.get(i)!;
    const bytes = outputs[i].byteLength;
    const align = effectiveAlignment(
      options.minPackedAlignmentBytes,
      elementSizeOf(outputs[i].dtype),
    );
    const joins = options.packCpuTensors && members.length > 0 && offset >= end &&
      offset - end <= MAX_RUN_GAP && (offset - start) % align === 0 &&
      offset + bytes - start <= options.maxPackedChunkBytes;
    if (!joins) {
      flush();
      start = offset;
      end = offset;
    }
    members.push(i);
    end = Math.max(end, offset + bytes);
  }
  flush();
}

interface Run {
  arena: ArenaMemory;
  members: number[];
  offsets: Map<number, number>;
  start: number;
  end: number;
}

function sendRun(route: Route, submission: Submission, run: Run): void {
  const { target } = route;
  const pool = devicePool(target);
  const span = run.end - run.start;
  const block = pool.acquire(span);
  const storage = new Storage(pool, block, run.members.length);
  for (const i of run.members) route.bind(i, storage, run.offsets.get(i)! - run.start);
  if (span > 0) {
    copyAsync({
      device: target,
      dst: block.address,
      src: run.arena.address + run.start,
      bytes: span,
    });
    submission.stats.copies++;
  }
  if (run.members.length > 1) {
    submission.stats.chunks++;
    submission.stats.packedTensors += run.members.length;
  }
}
