import assert from "node:assert/strict";
import { pathFlag, shellWord } from "../../ffi/shim_permissions.ts";

/** What bash makes of `words` (one line of a pasted command), with HOME set to `home`. */
async function bashReads(words: string, home = "/home/u"): Promise<string[]> {
  const output = await new Deno.Command("bash", {
    args: ["-c", `printf '%s\\n' ${words}`],
    env: { HOME: home, run: "EXPANDED" },
    clearEnv: true,
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return new TextDecoder().decode(output.stdout).split("\n").slice(0, -1);
}

const awkward = [
  "/data/plain/cache",
  "/home/a user/.cache",
  "/data/$run/cache", // a `$` was left for the shell to expand
  "/data/`run`/cache",
  '/data/quote"d/cache',
  "/data/back\\slash/cache",
  "/data/it's/cache",
];

Deno.test("shellWord() and pathFlag() give words that a shell reads back as the exact path", async () => {
  for (const path of awkward) {
    assert.deepEqual(await bashReads(shellWord(path)), [path], `shellWord(${path})`);
    assert.deepEqual(
      await bashReads(pathFlag("read", path)),
      [`--allow-read=${path}`],
      `pathFlag(${path})`,
    );
  }
});

Deno.test("pathFlag() leaves $HOME for the shell to expand, and only that", async () => {
  assert.deepEqual(await bashReads(pathFlag("write", "$HOME/.cache/mtc-core")), [
    "--allow-write=/home/u/.cache/mtc-core",
  ]);
  assert.deepEqual(await bashReads(pathFlag("write", "$HOME/$run/x")), [
    "--allow-write=/home/u/$run/x",
  ]);
});
