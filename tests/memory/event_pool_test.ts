import assert from "node:assert/strict";
import {
  acquireEvent,
  EVENT_FRONT,
  releaseEvent,
  releaseIdleEvents,
} from "../../src/memory/event_pool.ts";
import { hasGpu } from "../gpu/_helpers.ts";

// Events come from the shim's process-wide cache: these need a GPU. (The
// isolate's end, `abandonEvents`, is tested by tests/gpu/workers_test.ts.)

Deno.test({
  name: "a released event is the next one acquired on its device, with no new event made",
  ignore: !hasGpu,
  fn() {
    const event = acquireEvent(0);
    releaseEvent(0, event);
    assert.equal(acquireEvent(0), event);
    releaseEvent(0, event);
  },
});

Deno.test({
  name:
    "the isolate keeps EVENT_FRONT idle events per device; the ones past it go back to the process",
  ignore: !hasGpu,
  fn() {
    releaseIdleEvents();
    const events = Array.from({ length: EVENT_FRONT + 3 }, () => acquireEvent(0));
    assert.equal(new Set(events).size, events.length);
    for (const event of events) releaseEvent(0, event);
    // The front is served last in, first out: the first EVENT_FRONT released.
    const again = Array.from({ length: EVENT_FRONT }, () => acquireEvent(0));
    assert.deepEqual(new Set(again), new Set(events.slice(0, EVENT_FRONT)));
    for (const event of again) releaseEvent(0, event);
    releaseIdleEvents();
  },
});

Deno.test({
  name:
    "releaseIdleEvents() gives the idle ones to the process: the next acquire takes one from the shim",
  ignore: !hasGpu,
  fn() {
    const event = acquireEvent(0);
    releaseEvent(0, event);
    releaseIdleEvents();
    // Taken back from the process-wide cache (which may hand out the same
    // handle again); it is usable: released and acquired as any other.
    const next = acquireEvent(0);
    assert.equal(typeof next, "number");
    releaseEvent(0, next);
    assert.equal(acquireEvent(0), next);
    releaseEvent(0, next);
  },
});
