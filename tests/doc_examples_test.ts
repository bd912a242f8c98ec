import assert from "node:assert/strict";

const root = new URL("../", import.meta.url);

/** Every JSDoc `@example` block of the package's modules, with where it is. */
async function examples(): Promise<{ where: string; code: string }[]> {
  const found = [];
  const files = ["mod.ts"];
  for (const dir of ["src", "ffi", "examples"]) {
    for await (const path of walk(new URL(`${dir}/`, root))) files.push(path);
  }
  for (const file of files) {
    const text = await Deno.readTextFile(new URL(file, root));
    for (const match of text.matchAll(/@example[^\n]*\n((?:\s*\*[^\n]*\n)*?)\s*\*\s*```\n/g)) {
      const line = text.slice(0, match.index).split("\n").length;
      found.push({ where: `${file}:${line}`, code: match[1] });
    }
  }
  return found;
}

async function* walk(
  dir: URL,
  prefix = dir.pathname.slice(root.pathname.length),
): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory) yield* walk(new URL(`${entry.name}/`, dir), `${prefix}${entry.name}/`);
    else if (entry.name.endsWith(".ts")) yield `${prefix}${entry.name}`;
  }
}

Deno.test("every JSDoc example asserts with node:assert/strict, never console.assert (which cannot fail a doc test)", async () => {
  const all = await examples();
  assert.ok(all.length >= 20, `${all.length} examples found`);
  const weak = all.filter(({ code }) =>
    code.includes("console.assert") || !/from "node:assert\/strict"/.test(code) ||
    !/\bassert(\.\w+)?\(/.test(code)
  );
  assert.deepEqual(weak.map((e) => e.where), []);
});
