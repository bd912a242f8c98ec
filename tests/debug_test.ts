import assert from "node:assert/strict";

const modUrl = new URL("../mod.ts", import.meta.url).href;

async function run(env: Record<string, string>): Promise<string> {
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(
    file,
    `import { startCopy } from ${JSON.stringify(modUrl)};
await startCopy({ a: [new Float32Array(4), new Int8Array(3)] }, "cpu").get();
await startCopy([new Uint8Array(2)], "cpu").get();`,
  );
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-check", "--allow-ffi", "--allow-env", file],
    env: { PATH: Deno.env.get("PATH") ?? "", ...env },
    clearEnv: true,
  }).output().finally(() => Deno.remove(file));
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return new TextDecoder().decode(output.stderr);
}

Deno.test("MTC_DEBUG=1 writes one line per copy to stderr: what moved and how long it took", async () => {
  const lines = (await run({ MTC_DEBUG: "1" })).split("\n").filter((l) =>
    l.startsWith("@mtc/core: copy")
  );
  assert.equal(lines.length, 2);
  assert.match(lines[0], /2 tensors, 19 bytes, 0 packed in 0 chunk\(s\), 0 transfer\(s\)/);
  assert.match(lines[0], /submitted in [\d.]+ µs, completed after [\d.]+ µs/);
});

Deno.test("without MTC_DEBUG a copy writes nothing", async () => {
  assert.doesNotMatch(await run({}), /@mtc\/core: copy/);
});
