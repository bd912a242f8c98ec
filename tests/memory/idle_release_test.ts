import assert from "node:assert/strict";
import { MAX_TIMER_MS, timerDelay } from "../../src/memory/idle_release.ts";

Deno.test("an idle release due past setTimeout's range waits the longest delay it keeps, never 1 ms", () => {
  // setTimeout fires a delay above 2^31 - 1 ms after 1 ms: an idleReleaseMs
  // of a month would have freed idle memory at once.
  for (const due of [MAX_TIMER_MS + 1, 30 * 24 * 3600 * 1000, 2 ** 53]) {
    assert.equal(timerDelay(due), MAX_TIMER_MS, String(due));
  }
  assert.equal(timerDelay(MAX_TIMER_MS), MAX_TIMER_MS);
  assert.equal(timerDelay(50), 50);
  assert.equal(timerDelay(-1), 0);
});
