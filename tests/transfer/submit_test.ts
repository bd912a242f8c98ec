import assert from "node:assert/strict";
import type { Route } from "../../src/route.ts";
import { submitAfter, submitWhenAdmitted } from "../../src/transfer/submit.ts";

// The parts of submission that run before anything is queued: a copy that
// waits (for memory, or for work not queued yet). What is queued once it
// is admitted is specified on a GPU (tests/gpu/not_queued_test.ts,
// tests/gpu/limits_test.ts); a copy that times out waiting, in
// admission_queue_test.ts.

/** A stand-in of what a waiting copy reads of its route, logging what it is asked to do. */
function routeLogging(log: string[]): Route {
  return {
    tensors: 2,
    bytes: 24,
    target: 0,
    outputs: [{ dispose: () => log.push("dispose output") }],
    arenas: [
      { hold: () => log.push("hold arena"), release: () => log.push("release arena") },
    ],
    inputStorages: () => [
      { retain: () => log.push("retain input"), release: () => log.push("release input") },
    ],
    captureSources: () => log.push("capture sources"),
    releaseLists: () => log.push("release lists"),
  } as unknown as Route;
}

Deno.test("a waiting copy records where its inputs lie and holds them at once, before it is admitted", () => {
  const log: string[] = [];
  const job = submitWhenAdmitted(routeLogging(log), new Promise(() => {}));
  assert.deepEqual(log, ["capture sources", "retain input", "hold arena"]);
  assert.equal(job.waitsForMemory, true);
  assert.deepEqual(job.events, []);
  assert.deepEqual(job.stats, { tensors: 2, bytes: 24, packedTensors: 0, chunks: 0, copies: 0 });
});

Deno.test("a waiting copy aborted before it is admitted gives back its holds, outputs and lists", () => {
  const log: string[] = [];
  const job = submitWhenAdmitted(routeLogging(log), new Promise(() => {}));
  log.length = 0;
  job.abort();
  assert.deepEqual(log.sort(), [
    "dispose output",
    "release arena",
    "release input",
    "release lists",
  ]);
});

Deno.test("a copy ordered after work that fails is not admitted: its submitted rejects with that failure", async () => {
  const log: string[] = [];
  const failure = new Error("the work it waited for failed");
  const job = submitAfter(routeLogging(log), Promise.reject(failure));
  await assert.rejects(job.submitted!, (error) => error === failure);
  assert.deepEqual(log, ["capture sources", "retain input", "hold arena"], "nothing was queued");
  job.abort();
  assert.ok(log.includes("release input") && log.includes("dispose output"));
});
