import assert from "node:assert/strict";
import {
  DEFAULT_MEMORY_LIMITS,
  memoryLimits,
  parseLimit,
  setMemoryLimits,
} from "../../src/memory/limits.ts";

Deno.test("parseLimit() reads bytes with an optional unit, and Infinity", () => {
  assert.equal(parseLimit("4096", "X"), 4096);
  assert.equal(parseLimit("512MiB", "X"), 512 * 1024 ** 2);
  assert.equal(parseLimit(" 2 GiB ", "X"), 2 * 1024 ** 3);
  assert.equal(parseLimit("1.5k", "X"), 1500);
  assert.equal(parseLimit("infinity", "X"), Infinity);
});

Deno.test("parseLimit() names the variable when the text is not a limit", () => {
  assert.throws(() => parseLimit("lots", "MTC_PINNED_LIMIT"), {
    name: "TypeError",
    message: /MTC_PINNED_LIMIT="lots"/,
  });
  assert.throws(() => parseLimit("4 parsecs", "MTC_DEVICE_LIMIT"), TypeError);
  assert.throws(() => parseLimit("-1", "MTC_DEVICE_LIMIT"), TypeError);
});

Deno.test("setMemoryLimits() changes only what it is given and returns what is in force", () => {
  const before = setMemoryLimits({});
  try {
    const after = setMemoryLimits({ idleReleaseMs: 5 });
    assert.equal(after.idleReleaseMs, 5);
    assert.equal(after.pinnedBytes, before.pinnedBytes);
    assert.equal(memoryLimits().idleReleaseMs, 5);
  } finally {
    setMemoryLimits(before);
  }
  assert.deepEqual(setMemoryLimits({}), before);
});

Deno.test("setMemoryLimits() rejects unknown names, non-numbers and negative or fractional values", () => {
  const before = setMemoryLimits({});
  assert.throws(() => setMemoryLimits({ pinnedByte: 1 } as never), {
    name: "TypeError",
    message: /unknown limit "pinnedByte"/,
  });
  assert.throws(() => setMemoryLimits({ deviceBytes: "1GiB" as never }), TypeError);
  assert.throws(() => setMemoryLimits({ deviceBytes: NaN }), TypeError);
  assert.throws(() => setMemoryLimits({ waitMs: -1 }), RangeError);
  assert.throws(() => setMemoryLimits({ pinnedBytes: 1.5 }), RangeError);
  assert.throws(() => setMemoryLimits(null as never), TypeError);
  assert.deepEqual(setMemoryLimits({}), before);
});

Deno.test("the documented defaults hold where the environment sets nothing", () => {
  assert.deepEqual(DEFAULT_MEMORY_LIMITS, {
    pinnedBytes: 4 * 1024 ** 3,
    deviceBytes: 16 * 1024 ** 3,
    idleReleaseMs: 10_000,
    waitMs: 60_000,
  });
});

Deno.test("limits come from the environment where it is granted", async () => {
  const code = `
    import { memoryLimits } from "${new URL("../../src/memory/limits.ts", import.meta.url)}";
    console.log(JSON.stringify(memoryLimits()));`;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", code],
    env: { MTC_PINNED_LIMIT: "64MiB", MTC_IDLE_RELEASE_MS: "250" },
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  const limits = JSON.parse(new TextDecoder().decode(output.stdout));
  assert.equal(limits.pinnedBytes, 64 * 1024 ** 2);
  assert.equal(limits.idleReleaseMs, 250);
  assert.equal(limits.deviceBytes, DEFAULT_MEMORY_LIMITS.deviceBytes);
});
