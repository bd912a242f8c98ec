/**
 * For tests/staging/parallel_pack_test.ts: packs, in this fresh process,
 * one chunk of 256 members of each payload size in `Deno.args` (bytes, in
 * that order) with `packInParallel`, and prints after each how many packing
 * helper threads the process has: threads the shim started, which carry the
 * main thread's name (Deno's own threads have names of their own). The
 * helpers stay for later jobs, so the counts only grow. Run with `-A`:
 * reading /proc/self needs every permission.
 */

import { viewAddress } from "../../ffi/native.ts";
import { resolveOptions } from "../../src/options.ts";
import { Route } from "../../src/route.ts";
import { packInParallel } from "../../src/staging/parallel_pack.ts";
import { walk } from "../../src/walk/walk.ts";

const MEMBERS = 256;

function threadsNamed(name: string): number {
  let count = 0;
  for (const task of Deno.readDirSync("/proc/self/task")) {
    if (Deno.readTextFileSync(`/proc/self/task/${task.name}/comm`).trim() === name) count++;
  }
  return count;
}

const main = Deno.readTextFileSync(`/proc/self/task/${Deno.pid}/comm`).trim();
const counts: number[] = [];
for (const payload of Deno.args.map(Number)) {
  const bytes = payload / MEMBERS;
  const route = new Route(0, resolveOptions(undefined));
  walk(Array.from({ length: MEMBERS }, () => new Uint8Array(bytes)), route);
  const stage = new Uint8Array(payload);
  const plan = {
    members: Array.from({ length: MEMBERS }, (_, m) => m),
    offsets: Array.from({ length: MEMBERS }, (_, m) => m * bytes),
    base: 0,
    start: 0,
    end: payload,
  };
  packInParallel(route, route.h2d.view(), plan, {
    address: viewAddress(stage),
    size: payload,
  }, new Uint8Array(MEMBERS));
  route.releaseLists();
  counts.push(threadsNamed(main) - 1);
}
console.log(JSON.stringify(counts));
