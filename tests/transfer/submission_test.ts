/**
 * The ledger of one copy (Note [Submission lifetime] in
 * src/transfer/submission.ts), with the pinned pool, the events and the
 * streams stood in by a log: these tests say when the ledger gives things
 * back, not what CUDA does with them.
 */
import assert from "node:assert/strict";
import { createCopyHandle } from "../../src/copy_handle.ts";
import type { EventOps } from "../../src/copy_job.ts";
import type { Block } from "../../src/memory/block_pool_types.ts";
import type { LedgerOps, LedgerRoute } from "../../src/transfer/ledger_ops.ts";
import { Submission } from "../../src/transfer/submission.ts";

/** Ledger operations that log what they do; events numbered from 1. */
function loggedOps(log: string[]): LedgerOps {
  let nextEvent = 1;
  let nextAddress = 4096;
  return {
    acquireStaging(bytes: number): Block {
      const block = { address: nextAddress, size: bytes };
      nextAddress += bytes;
      log.push(`take staging ${block.address}`);
      return block;
    },
    releaseStaging: (block) => log.push(`release staging ${block.address}`),
    acquireEvent: () => nextEvent++,
    releaseEvent: (device, event) => log.push(`release event ${device}:${event}`),
    recordEvent: (device, event) => log.push(`record event ${device}:${event}`),
    drainStream: (device) => log.push(`drain ${device}`),
    stageInBackground: () => Promise.resolve(),
  };
}

/** A copy to `target` with one pooled input, one host arena and one output. */
function loggedRoute(log: string[], target = 0): LedgerRoute {
  return {
    target,
    tensors: 1,
    bytes: 4,
    outputs: [{ dispose: () => log.push("dispose output") }],
    arenas: [{ hold: () => log.push("hold arena"), release: () => log.push("release arena") }],
    inputStorages: () => [
      { retain: () => log.push("retain input"), release: () => log.push("release input") },
    ],
    captureSources: () => log.push("capture sources"),
  };
}

/** Events that complete when the test says so. */
function controlledEvents(log: string[]) {
  const completed = new Set<number>();
  const ops: EventOps = {
    status: (_, event) => completed.has(event) ? 0 : -1,
    wait: () => Promise.resolve(0),
    release: (device, event) => log.push(`release event ${device}:${event}`),
  };
  return { ops, complete: (event: number) => completed.add(event) };
}

Deno.test("staging goes back only once every event of the copy has completed", () => {
  const log: string[] = [];
  const submission = new Submission(loggedRoute(log), undefined, undefined, loggedOps(log));
  submission.involve(0);
  submission.involve(1);
  submission.takeStaging(100);
  // A peer copy's source device (1) gets its own completion event (1), the target (0) event 2.
  submission.recordCompletion(1);
  const events = controlledEvents(log);
  const handle = createCopyHandle({ ...submission.job(() => {}), eventOps: events.ops });

  assert.equal(handle.ready(), false);
  events.complete(1);
  assert.equal(handle.ready(), false, "one event of two completed: the copy is not done");
  assert.ok(!log.includes("release staging 4096"), "staging released before the last event");

  events.complete(2);
  assert.equal(handle.ready(), true);
  assert.ok(log.includes("release staging 4096"));
  assert.deepEqual(log.filter((line) => line.startsWith("release event")), [
    "release event 1:1",
    "release event 0:2",
  ]);
});

Deno.test("the input storages and arenas are held until the copy settles", () => {
  const log: string[] = [];
  const submission = new Submission(loggedRoute(log), undefined, undefined, loggedOps(log));
  submission.holdArena({
    hold: () => log.push("hold arena"),
    release: () => log.push("release arena"),
  });
  submission.involve(0);
  const job = submission.job(() => log.push("completed"));
  assert.deepEqual(log, ["hold arena", "retain input", "record event 0:1"]);
  job.complete();
  assert.deepEqual(log.slice(3), ["release input", "release arena", "completed"]);
});

Deno.test("pinned outputs are held until the copy settles, after its outputs are disposed on abort", () => {
  const log: string[] = [];
  const output = (name: string) => ({
    retain: () => log.push(`retain ${name}`),
    release: () => log.push(`release ${name}`),
  });
  const submission = new Submission(loggedRoute(log), undefined, undefined, loggedOps(log));
  submission.involve(0);
  submission.holdOutput(output("run"));
  submission.holdOutput(output("chunk"));
  const job = submission.job(() => log.push("completed"));
  assert.deepEqual(log, ["retain run", "retain chunk", "retain input", "record event 0:1"]);
  job.complete();
  assert.deepEqual(log.slice(4), ["release input", "release run", "release chunk", "completed"]);

  log.length = 0;
  const failed = new Submission(loggedRoute(log), undefined, undefined, loggedOps(log));
  failed.involve(0);
  failed.holdOutput(output("run"));
  failed.abort();
  // The outputs' own holds go first (disposed), the ledger's last: the
  // block returns only once both are gone, after the drain.
  assert.deepEqual(log.slice(1), ["drain 0", "dispose output", "release run"]);
});

Deno.test("abort drains every stream the copy touched before it releases anything", () => {
  const log: string[] = [];
  const submission = new Submission(loggedRoute(log), undefined, undefined, loggedOps(log));
  submission.involve(0);
  submission.involve(1);
  submission.takeStaging(100);
  submission.fence(1);
  submission.recordCompletion(1);
  log.length = 0;

  submission.abort();

  assert.deepEqual(log.slice(0, 2), ["drain 0", "drain 1"]);
  assert.deepEqual(log.slice(2).sort(), [
    "dispose output",
    "release event 1:1",
    "release event 1:2",
    "release staging 4096",
  ]);
});

Deno.test("abort still releases everything when draining a stream fails", () => {
  const log: string[] = [];
  const ops = loggedOps(log);
  const submission = new Submission(loggedRoute(log), undefined, undefined, {
    ...ops,
    drainStream: () => {
      throw new Error("the stream failed");
    },
  });
  submission.involve(0);
  submission.takeStaging(100);
  submission.abort();
  assert.ok(log.includes("release staging 4096"));
  assert.ok(log.includes("dispose output"));
});

Deno.test("inputs held before a wait are taken over by the ledger, not held twice", () => {
  const log: string[] = [];
  const route = loggedRoute(log);
  const held = Submission.holdInputs(route);
  assert.deepEqual(log, ["capture sources", "retain input", "hold arena"]);
  const submission = new Submission(route, undefined, held, loggedOps(log));
  submission.holdArena(route.arenas[0]);
  submission.involve(0);
  submission.job(() => {}).complete();
  assert.deepEqual(log.slice(3), ["record event 0:1", "release input", "release arena"]);
});
