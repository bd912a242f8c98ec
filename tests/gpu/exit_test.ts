import assert from "node:assert/strict";
import { hasGpu } from "./_helpers.ts";

// A process may exit at any time, copies in flight or not: its exit handler
// stops background staging before it frees anything (src/transfer/exit_release.ts).

Deno.test({
  ignore: !hasGpu,
  name:
    "a process that exits while a large pageable copy is staged in the background exits cleanly",
  async fn() {
    const fixture = new URL("./_exit_mid_copy.ts", import.meta.url).pathname;
    // 4 runs in 8 died with SIGSEGV at 2 ms before the exit handler stopped staging.
    for (const delay of [0, 1, 2, 2, 3, 3, 4, 5, 6, 8]) {
      const { code, signal, stderr } = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--allow-ffi", "--allow-read", "--allow-env", fixture, String(delay)],
        stdout: "null",
        stderr: "piped",
      }).output();
      const why = `exit after ${delay} ms: ${new TextDecoder().decode(stderr)}`;
      assert.equal(signal, null, why);
      assert.equal(code, 0, why);
    }
  },
});
