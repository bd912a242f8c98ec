import assert from "node:assert/strict";
import { HandOverPause } from "../src/hand_over_pause.ts";

// A walk that keeps handing over is paused for a number of copies; one
// that succeeds in between is not; a pause ends by itself.

Deno.test("hand-overs in a row pause the walk for the given copies, then it runs again", () => {
  const pause = new HandOverPause(2, 10);
  assert.ok(pause.next());
  pause.failed();
  assert.ok(pause.next()); // one hand-over: no pause yet
  pause.failed();
  const runs = Array.from({ length: 12 }, () => pause.next());
  assert.deepEqual(runs, [
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    true,
    true,
    true,
  ]);
});

Deno.test("a walk that took every leaf ends the run of hand-overs; reset forgets a pause", () => {
  const pause = new HandOverPause(2, 10);
  pause.next();
  pause.failed();
  pause.next();
  pause.succeeded();
  pause.next();
  pause.failed();
  assert.ok(pause.next(), "hand-overs not in a row: no pause");
  pause.failed();
  assert.equal(pause.next(), false);
  pause.reset();
  assert.ok(pause.next());
});
