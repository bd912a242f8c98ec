import assert from "node:assert/strict";
import { devicePool } from "../../src/memory/device_memory.ts";
import { memoryLimits } from "../../src/memory/limits.ts";
import { pinnedPool } from "../../src/memory/pinned_memory.ts";
import { PRODUCTION_ADMISSION } from "../../src/transfer/admission.ts";

// The queue's rules are specified with stand-in pools and clock in
// admission_queue_test.ts; this is the production wiring, and the check of
// the environment that every copy moving bytes makes first.

Deno.test("PRODUCTION_ADMISSION: the library's pinned and device pools, limits and clock", () => {
  assert.equal(PRODUCTION_ADMISSION.pinned(), pinnedPool);
  assert.equal(PRODUCTION_ADMISSION.device, devicePool);
  assert.equal(PRODUCTION_ADMISSION.limits, memoryLimits);
  const before = performance.now();
  const now = PRODUCTION_ADMISSION.now();
  assert.ok(now >= before && now <= performance.now());
});

/** What tests/transfer/_admission_child.ts prints for a copy moving `bytes`, under `env`. */
async function admittedInChild(bytes: number, env: Record<string, string>): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-env",
      "--allow-ffi",
      "--allow-read",
      new URL("_admission_child.ts", import.meta.url).href,
      String(bytes),
    ],
    env,
    stdin: "null",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  return new TextDecoder().decode(stdout).trim();
}

Deno.test("admission: a copy that moves bytes throws the error of a malformed limit variable", async () => {
  const printed = await admittedInChild(1024, { MTC_PINNED_LIMIT: "lots" });
  assert.match(printed, /^TypeError: Invalid MTC_PINNED_LIMIT/);
});

Deno.test("admission: a copy that moves no bytes is admitted whatever the variables say", async () => {
  assert.equal(await admittedInChild(0, { MTC_PINNED_LIMIT: "lots" }), "admitted");
});

Deno.test("admission: with well-formed limits, a copy that fits is admitted at once", async () => {
  assert.equal(await admittedInChild(1024, { MTC_PINNED_LIMIT: "1048576" }), "admitted");
});
