import assert from "node:assert/strict";
import { BACKGROUND_MIN_BYTES, JOB_BYTES } from "../../src/staging/background.ts";

// What needs no GPU: how many staging jobs run at once. The staging itself
// (pinned slots, device copies) is specified on a GPU in
// tests/gpu/cpu_to_cuda_test.ts and tests/memory/stager_pool_test.ts.

/** stagingConcurrency() in a fresh process (it is read once per isolate), with `env`. */
async function concurrencyWith(env: Record<string, string>, allowEnv = true): Promise<number> {
  const code = `import { stagingConcurrency } from ${
    JSON.stringify(new URL("../../src/staging/background.ts", import.meta.url).href)
  }; console.log(stagingConcurrency());`;
  const { code: status, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      ...(allowEnv ? ["--allow-env=MTC_STAGING_THREADS"] : []),
      `data:application/typescript,${encodeURIComponent(code)}`,
    ],
    env,
    stdin: "null",
  }).output();
  assert.equal(status, 0, new TextDecoder().decode(stderr));
  return Number(new TextDecoder().decode(stdout));
}

const byCores = Math.max(1, Math.min(16, (navigator.hardwareConcurrency ?? 2) - 2));

Deno.test("stagingConcurrency: MTC_STAGING_THREADS from 1 to 64 where set and granted", async () => {
  assert.equal(await concurrencyWith({ MTC_STAGING_THREADS: "3" }), 3);
  assert.equal(await concurrencyWith({ MTC_STAGING_THREADS: "64" }), 64);
});

Deno.test("stagingConcurrency: else the cores less two, from 1 to 16 (an unusable or ungranted variable is not read)", async () => {
  for (const value of ["0", "65", "many", ""]) {
    assert.equal(await concurrencyWith({ MTC_STAGING_THREADS: value }), byCores, value);
  }
  assert.equal(await concurrencyWith({ MTC_STAGING_THREADS: "3" }, false), byCores);
});

Deno.test("a job stages at least what is staged in the background at all", () => {
  assert.ok(JOB_BYTES >= BACKGROUND_MIN_BYTES, `${JOB_BYTES} < ${BACKGROUND_MIN_BYTES}`);
});
