import assert from "node:assert/strict";
import { grantedEnv } from "../src/env.ts";

Deno.test("grantedEnv reads a variable whose permission is granted", () => {
  Deno.env.set("MTC_ENV_TEST_VALUE", "set here");
  try {
    assert.equal(grantedEnv("MTC_ENV_TEST_VALUE"), "set here");
  } finally {
    Deno.env.delete("MTC_ENV_TEST_VALUE");
  }
});

Deno.test("grantedEnv is undefined for an unset variable", () => {
  Deno.env.delete("MTC_ENV_TEST_UNSET");
  assert.equal(grantedEnv("MTC_ENV_TEST_UNSET"), undefined);
});

Deno.test({
  name:
    "grantedEnv is undefined, without prompting or throwing, where the permission is not granted",
  permissions: { env: ["MTC_ENV_TEST_OTHER"] },
  fn() {
    assert.equal(Deno.permissions.querySync({ name: "env", variable: "HOME" }).state, "prompt");
    assert.equal(grantedEnv("HOME"), undefined);
  },
});
