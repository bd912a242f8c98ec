import assert from "node:assert/strict";
import { closeStagingWorkers, poolSize, stageOnWorkers } from "../../src/staging/worker_pool.ts";

Deno.test("staging Workers that are closed as soon as they start still close (nothing posted before they are ready)", async () => {
  // The workers' imports load the shim with a top-level await; a message
  // posted before a worker's handler exists would be lost and this would hang.
  await stageOnWorkers([]);
  const started = performance.now();
  await closeStagingWorkers();
  assert.ok(performance.now() - started < 30_000);
  assert.ok(poolSize() >= 1);
});
