import assert from "node:assert/strict";

// Installing the lifecycle hooks happens at import of the package, in every
// isolate: it must need no permission (no prompt, no throw) and leave the
// process free to exit. Workers: tests/worker_import_test.ts; the exit
// release on a GPU: tests/gpu/exit_test.ts.

/** Runs tests/_lifecycle_import.ts with `permissions` only (no other could be prompted for). */
async function runWith(permissions: string[], ...args: string[]): Promise<Deno.CommandOutput> {
  const script = new URL("_lifecycle_import.ts", import.meta.url).href;
  return await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", ...permissions, script, ...args],
    env: { MTC_IDLE_RELEASE_MS: "5" },
    stdin: "null",
  }).output();
}

Deno.test("importing the lifecycle hooks needs no permission and the process exits by itself", async () => {
  const result = await runWith([]);
  const stderr = new TextDecoder().decode(result.stderr);
  assert.equal(result.code, 0, stderr);
  assert.equal(new TextDecoder().decode(result.stdout), "imported\n");
  assert.equal(stderr, "");
});

Deno.test("after a release of pooled memory, the idle release reads no ungranted variable and the process exits", async () => {
  // The permissions a copy needs (the shim), none for the environment.
  const result = await runWith(["--allow-ffi", "--allow-read"], "release");
  const stderr = new TextDecoder().decode(result.stderr);
  assert.equal(result.code, 0, stderr);
  assert.equal(new TextDecoder().decode(result.stdout), "released\n");
  assert.doesNotMatch(stderr, /NotCapable|env access/);
});
