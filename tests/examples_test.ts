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

/** The code of the README's first ```ts block under `## Use`, importing this checkout. */
function readmeUseBlock(): string {
  const readme = Deno.readTextFileSync(`${root}README.md`);
  const section = readme.slice(readme.indexOf("\n## Use\n"));
  const block = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(block, "README.md has a ```ts block under ## Use");
  return block[1].replace(`"jsr:@mtc/core"`, JSON.stringify(new URL("mod.ts", `file://${root}`)));
}

Deno.test("the README's Use block runs twice in a row over the same batch (a second epoch)", async () => {
  const code = readmeUseBlock();
  // Everything from the copy on runs twice, over the batch built once.
  const split = code.indexOf("const handle");
  assert.ok(split > 0, "the block starts its copy with `const handle`");
  const twice = `${code.slice(0, split)}for (let epoch = 0; epoch < 2; epoch++) {\n${
    code.slice(split)
  }\n}\nconsole.log("two epochs done");\n`;
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, twice);
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-ffi", "--allow-read", "--allow-env", file],
      cwd: root,
    }).output();
    const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
    assert.equal(output.code, 0, text);
    assert.match(text, /two epochs done/);
  } finally {
    await Deno.remove(file);
  }
});
