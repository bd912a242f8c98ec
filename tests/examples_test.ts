import assert from "node:assert/strict";

const root = new URL("../", import.meta.url).pathname;

async function runExample(name: string): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-ffi", "--allow-read", "--allow-env", `${root}examples/${name}`],
    cwd: root,
  }).output();
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, text);
  return text;
}

Deno.test("examples/example.ts runs and copies the 528 tensors of the reference batch", async () => {
  const output = await runExample("example.ts");
  assert.match(output, /528 tensors \(143052 bytes\)/);
  // The arena batch: one transfer on a GPU, none where the CPU stands in.
  assert.match(
    output,
    /from a host arena \(\d+ of 1048576 bytes used, .*\): 528 tensors, [01] transfer/,
  );
});

Deno.test("examples/training_loop.ts runs every step and checks it against the CPU", async () => {
  const text = await runExample("training_loop.ts");
  assert.equal(text.match(/\(matches the CPU\)/g)?.length, 12);
  assert.match(text, /12 steps on (cpu|cuda:0)/);
});
