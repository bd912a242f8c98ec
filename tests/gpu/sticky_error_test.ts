import assert from "node:assert/strict";
import { hasGpu } from "./_helpers.ts";

// A kernel that faults (CUDA_ERROR_ILLEGAL_ADDRESS) breaks its device's
// context for good. Every later copy to or from that device must fail with a
// CudaError naming the error, without hanging and without crashing the
// process. A context cannot be repaired, so this runs in a process of its own.

const gpu = { ignore: !hasGpu };

const CHILD = `
import { CudaError, startCopy } from "${new URL("../../mod.ts", import.meta.url)}";
import { testAids } from "${new URL("../../ffi/test_aids.ts", import.meta.url)}";
const batch = () => [new Float32Array(64).fill(1), new Int32Array(3), new Uint8Array(2 << 20)];
const before = await startCopy(batch(), "cuda:0").get();
testAids.triggerIllegalAddress(0);
const outcomes = [];
for (const [label, start] of [
  ["cpu→cuda:0", () => startCopy(batch(), "cuda:0")],
  ["cuda:0→cpu", () => startCopy(before, "cpu")],
  ["cpu→cuda:0 again", () => startCopy(batch(), "cuda:0")],
]) {
  try {
    await start().get();
    outcomes.push(label + ": resolved");
  } catch (error) {
    outcomes.push(label + ": " + (error instanceof CudaError ? "CudaError " : "other ") + error.message);
  }
}
console.log(JSON.stringify(outcomes));
`;

Deno.test({
  ...gpu,
  name: "after an illegal-address fault every copy on that device fails with a CudaError, no hang",
  async fn() {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-check", CHILD],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    });
    const output = await child.output();
    const stderr = new TextDecoder().decode(output.stderr);
    assert.equal(output.signal, null, `the process was killed: ${stderr}`);
    assert.equal(output.code, 0, stderr);
    const outcomes: string[] = JSON.parse(new TextDecoder().decode(output.stdout).trim());
    assert.equal(outcomes.length, 3);
    for (const outcome of outcomes) {
      assert.match(outcome, /: CudaError .*CUDA_ERROR_ILLEGAL_ADDRESS/, outcome);
    }
  },
});
