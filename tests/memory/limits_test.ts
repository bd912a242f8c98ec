import assert from "node:assert/strict";
import {
  DEFAULT_MEMORY_LIMITS,
  memoryLimits,
  parseLimit,
  setMemoryLimits,
} from "../../src/memory/limits.ts";
import { memoryStats } from "../../mod.ts";

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
    message: /Invalid memory limit "pinnedByte": expected one of pinnedBytes, deviceBytes/,
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

Deno.test("a malformed MTC_*_LIMIT never makes setMemoryLimits throw: the call overrides it, copies fail until then", async () => {
  const code = `
    const limits = await import("${new URL("../../src/memory/limits.ts", import.meta.url)}");
    const report = { before: limits.memoryLimitsError?.()?.message };
    try {
      report.otherLimit = limits.setMemoryLimits({ waitMs: 5 }).waitMs;
      report.stillPending = limits.memoryLimitsError?.()?.message;
      report.pinnedBytes = limits.setMemoryLimits({ pinnedBytes: 1024 }).pinnedBytes;
      report.after = limits.memoryLimitsError?.()?.message ?? "none";
    } catch (error) {
      report.threw = error.message;
    }
    console.log(JSON.stringify(report));`;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", code],
    env: { MTC_PINNED_LIMIT: "lots" },
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  const report = JSON.parse(new TextDecoder().decode(output.stdout));
  assert.equal(report.threw, undefined, "setMemoryLimits must not throw the variable's error");
  assert.match(report.before, /Invalid MTC_PINNED_LIMIT="lots"/);
  assert.equal(report.otherLimit, 5);
  assert.match(
    report.stillPending,
    /MTC_PINNED_LIMIT/,
    "a call that leaves it unset keeps it failing copies",
  );
  assert.equal(report.pinnedBytes, 1024);
  assert.equal(report.after, "none");
});

Deno.test("setMemoryLimits() accepts only its own known keys, never inherited or Object.prototype names", () => {
  const before = setMemoryLimits({});
  for (const key of ["toString", "valueOf", "constructor", "hasOwnProperty", "__proto__"]) {
    assert.throws(
      () => setMemoryLimits(JSON.parse(`{"${key}": 1}`)),
      { name: "TypeError", message: new RegExp(`Invalid memory limit "${key}"`) },
      key,
    );
  }
  // Inherited properties are not the caller's limits.
  assert.deepEqual(setMemoryLimits(Object.create({ waitMs: 1 })), before);
  assert.equal(String(memoryStats().limits), "[object Object]");
  assert.deepEqual(Object.keys(memoryStats().limits).sort(), [
    "deviceBytes",
    "idleReleaseMs",
    "pinnedBytes",
    "waitMs",
  ]);
});
