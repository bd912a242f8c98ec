import assert from "node:assert/strict";
import { eventRecord } from "../../ffi/events.ts";
import { streamSynchronize } from "../../ffi/streams.ts";
import type { Block } from "../../src/memory/block_pool_types.ts";
import { acquireEvent, releaseEvent } from "../../src/memory/event_pool.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { stageInBackground } from "../../src/staging/background.ts";
import { CUDA_LEDGER_OPS } from "../../src/transfer/ledger_ops.ts";

// The ledger itself is specified in submission_test.ts with stand-in
// operations; this is the wiring of the production ones.

Deno.test("CUDA_LEDGER_OPS: events come from the event pool, and are recorded and drained by CUDA's calls", () => {
  assert.equal(CUDA_LEDGER_OPS.acquireEvent, acquireEvent);
  assert.equal(CUDA_LEDGER_OPS.releaseEvent, releaseEvent);
  assert.equal(CUDA_LEDGER_OPS.recordEvent, eventRecord);
  assert.equal(CUDA_LEDGER_OPS.drainStream, streamSynchronize);
  assert.equal(CUDA_LEDGER_OPS.stageInBackground, stageInBackground);
});

Deno.test("CUDA_LEDGER_OPS: staging blocks are the pinned pool's, acquired and released through it as it is now", () => {
  const calls: unknown[] = [];
  const block = { size: 4096 } as Block;
  // Looked up on each call (the pool's methods, not copies taken at import).
  const pool = pinnedPool as unknown as Record<string, unknown>;
  pool.acquire = (bytes: number) => (calls.push(["acquire", bytes]), block);
  pool.release = (released: Block) => calls.push(["release", released]);
  try {
    assert.equal(CUDA_LEDGER_OPS.acquireStaging(100), block);
    CUDA_LEDGER_OPS.releaseStaging(block);
  } finally {
    delete pool.acquire;
    delete pool.release;
  }
  assert.deepEqual(calls, [["acquire", 100], ["release", block]]);
});
