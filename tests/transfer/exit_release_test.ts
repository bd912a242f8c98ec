import assert from "node:assert/strict";
import { deviceCount } from "../../mod.ts";

// What exit_release.ts decides, at the `unload` of an isolate: nothing where
// the isolate never registered with the shim; else copies settled (every
// one), the pools forgetting their blocks while the isolate is still
// registered, then the isolate ended in the shim; each step on its own, so
// that one that throws stops neither the others nor a clean exit; once
// (a release installed again adds no listener, and one run again finds the
// isolate ended). Each case is a process of its own (tests/transfer/_exit_release_child.ts),
// whose `unload` fires when it ends. Elsewhere: the hook's installation
// (tests/lifecycle_test.ts), an exit in the middle of background staging
// (tests/gpu/exit_test.ts).

/** The lines the child prints in `mode`; asserts it exited cleanly, with nothing on stderr. */
async function releaseSeen(mode: string): Promise<string[]> {
  const child = new URL("./_exit_release_child.ts", import.meta.url).pathname;
  const { code, signal, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-check", "--allow-ffi", "--allow-read", "--allow-env", child, mode],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const errors = new TextDecoder().decode(stderr);
  assert.equal(signal, null, errors);
  assert.equal(code, 0, errors);
  assert.equal(errors, "");
  return new TextDecoder().decode(stdout).trim().split("\n");
}

const RELEASE = [
  "settle copies (every one: true)",
  "pinned pool abandons its blocks (attached: true)",
  "cuda:0 pool abandons its blocks (attached: true)",
  "after the release (attached: false)",
];

Deno.test("at unload, copies are settled, then the pools forget their blocks, then the isolate ends in the shim", async () => {
  assert.deepEqual(await releaseSeen("attached"), RELEASE);
});

Deno.test("at unload, an isolate that never registered with the shim (no pooled memory) releases nothing", async () => {
  assert.deepEqual(await releaseSeen("never"), ["after the release (attached: false)"]);
});

Deno.test("a step of the release that throws stops neither the steps after it nor a clean exit", async () => {
  // The pinned pool's step throws after printing its line.
  assert.deepEqual(await releaseSeen("failing"), RELEASE);
});

Deno.test("the release runs once: installed three times and unloaded twice, the later unload finds the isolate ended and releases nothing", async () => {
  assert.deepEqual(await releaseSeen("twice"), [
    ...RELEASE,
    "the process ends",
    "after the release (attached: false)",
  ]);
});

Deno.test({
  name:
    "at unload, a process's undisposed tensors and idle stagers are freed, and a pinned tensor's view is left empty, not dangling",
  ignore: deviceCount() === 0,
  async fn() {
    const lines = await releaseSeen("gpu");
    const state = (when: string) => {
      const line = lines.find((line) => line.startsWith(`${when}: `));
      assert.ok(line, `a line "${when}: …" in ${lines.join("\n")}`);
      return JSON.parse(line.slice(when.length + 2));
    };
    const before = state("before");
    assert.equal(before.pinnedViewBytes, 64);
    assert.ok(before.pinnedBytes > 0, "pinned memory held before");
    assert.ok(before.deviceBytes > 0, "device memory held before");
    assert.ok(before.stagerBytes > 0, "a background stager held before");
    assert.deepEqual(state("after"), {
      pinnedViewBytes: 0,
      pinnedBytes: 0,
      deviceBytes: 0,
      stagerBytes: 0,
    });
  },
});
