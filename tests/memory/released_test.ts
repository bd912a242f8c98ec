import assert from "node:assert/strict";
import { memoryReleased, onMemoryReleased } from "../../src/memory/released.ts";

Deno.test("memoryReleased calls every listener, in the order they were added, once per release", () => {
  const calls: string[] = [];
  let active = true;
  onMemoryReleased(() => active && calls.push("first"));
  onMemoryReleased(() => active && calls.push("second"));
  try {
    memoryReleased();
    assert.deepEqual(calls, ["first", "second"]);
    memoryReleased();
    assert.deepEqual(calls, ["first", "second", "first", "second"]);
  } finally {
    // Listeners cannot be removed: these two go quiet instead.
    active = false;
  }
});
