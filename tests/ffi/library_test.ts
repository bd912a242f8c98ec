import assert from "node:assert/strict";

Deno.test("the loader names the build command when the shim is missing", async () => {
  const script = `import { deviceCount } from ${
    JSON.stringify(new URL("../../mod.ts", import.meta.url).href)
  };
try { deviceCount(); } catch (e) { console.log(e.message); }`;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", script],
    env: { MTC_SHIM_PATH: "/nonexistent/libmtc.so" },
  }).output();
  const text = new TextDecoder().decode(output.stdout);
  assert.match(text, /Cannot load the @mtc\/core native shim at "\/nonexistent\/libmtc.so"/);
  assert.match(text, /deno task build/);
});
