import assert from "node:assert/strict";

const root = new URL("../", import.meta.url);
const readme = await Deno.readTextFile(new URL("README.md", root));

/** The README's TypeScript blocks, with the line each starts on. */
const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => ({
  line: readme.slice(0, match.index).split("\n").length,
  // A user imports jsr:@mtc/core; here it is this checkout.
  code: match[1].replaceAll(/"(jsr:)?@mtc\/core"/g, JSON.stringify(new URL("mod.ts", root).href)),
}));

async function deno(args: string[]): Promise<{ ok: boolean; text: string }> {
  const output = await new Deno.Command(Deno.execPath(), { args, cwd: root }).output();
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  return { ok: output.success, text };
}

Deno.test("the README has TypeScript blocks, each importing the package", () => {
  assert.ok(blocks.length >= 3, `${blocks.length} blocks`);
  for (const block of blocks) assert.match(block.code, /from "file:\/\/.*\/mod\.ts"/);
});

Deno.test("every TypeScript block of the README type-checks and runs (on the CPU without a GPU)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const files = [];
    for (const block of blocks) {
      const file = `${dir}/readme_line_${block.line}.ts`;
      await Deno.writeTextFile(file, block.code);
      files.push(file);
    }
    const checked = await deno(["check", ...files]);
    assert.ok(checked.ok, checked.text);
    for (const file of files) {
      const ran = await deno([
        "run",
        "--no-check",
        "--allow-ffi",
        "--allow-read",
        "--allow-env",
        file,
      ]);
      assert.ok(ran.ok, `${file.split("/").pop()}:\n${ran.text}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
