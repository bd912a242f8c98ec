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

/** Runs `script` in a child process (a faulted context cannot be repaired); returns what it printed. */
async function outcomesOf(script: string): Promise<string[]> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", script],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.signal, null, `the process was killed: ${stderr}`);
  assert.equal(output.code, 0, stderr);
  return JSON.parse(new TextDecoder().decode(output.stdout).trim());
}

Deno.test({
  ...gpu,
  name: "after an illegal-address fault every copy on that device fails with a CudaError, no hang",
  async fn() {
    const outcomes = await outcomesOf(CHILD);
    assert.equal(outcomes.length, 3);
    for (const outcome of outcomes) {
      assert.match(outcome, /: CudaError .*CUDA_ERROR_ILLEGAL_ADDRESS/, outcome);
    }
  },
});

const KERNEL_CHILD = `
import { CudaError, loadModule, startCopy } from "${new URL("../../mod.ts", import.meta.url)}";
const ptx = await Deno.readTextFile(new URL("${new URL(
  "../../examples/step_kernels.ptx",
  import.meta.url,
)}"));
const module = await loadModule(ptx);
const write = module.kernel("write_u32", ["ptr", "u32"]);
const [x] = await startCopy([new Uint32Array(4)], "cuda:0").get();
const describe = (error) => (error instanceof CudaError ? "CudaError " : "other ") + error.message;
const outcomes = [];
const work = write.launch({ grid: 1, block: 1, args: [16n, 1] });
await work.done().then(() => outcomes.push("done: resolved"), (e) => outcomes.push("done: " + describe(e)));
for (const [label, run] of [
  ["launch", async () => await write.launch({ grid: 1, block: 1, args: [x, 1] }).done()],
  ["cpu→cuda:0", () => startCopy([new Float32Array(8)], "cuda:0").get()],
  ["cuda:0→cpu", () => startCopy([x], "cpu").get()],
]) {
  try {
    await run();
    outcomes.push(label + ": resolved");
  } catch (error) {
    outcomes.push(label + ": " + describe(error));
  }
}
console.log(JSON.stringify(outcomes));
`;

Deno.test({
  ...gpu,
  name: "a user's kernel that faults rejects its done(); later launches and copies reject, no hang",
  async fn() {
    const outcomes = await outcomesOf(KERNEL_CHILD);
    assert.equal(outcomes.length, 4, outcomes.join("\n"));
    for (const outcome of outcomes) {
      assert.match(outcome, /: CudaError .*CUDA_ERROR_ILLEGAL_ADDRESS/, outcome);
    }
  },
});
