/**
 * A local stand-in for jsr.io serving this package: with `JSR_URL` pointing
 * at it, `import … from "jsr:@mtc/core"` resolves exactly as it does on
 * JSR. It answers `@mtc/core/meta.json` (the versions),
 * `@mtc/core/<version>_meta.json` (the manifest, every file's size and
 * SHA-256, which Deno checks, and the `exports` map, which makes any other
 * path an `Unknown export`) and `@mtc/core/<version>/<file>` for exactly the
 * files `deno publish --dry-run` lists (what JSR would publish). Prints
 * `listening <port> (<n> files)` once ready; serves until killed.
 *
 * Run by `tests/remote/run.sh`:
 * `deno run --allow-net=127.0.0.1 --allow-read --allow-run serve_registry.ts`
 *
 * @module
 */

const root = new URL("../../", import.meta.url);
const listing = await new Deno.Command(Deno.execPath(), {
  args: ["publish", "--dry-run", "--allow-dirty"],
  cwd: root,
  // Only what `deno publish` needs (an inherited LD_LIBRARY_PATH would need
  // --allow-run for everything).
  clearEnv: true,
  env: { PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? "/" },
  stdout: "piped",
  stderr: "piped",
}).output();
const text = new TextDecoder().decode(listing.stdout) + new TextDecoder().decode(listing.stderr);
const prefix = root.href;
const paths = [...text.matchAll(/(file:\/\/\S+)/g)].map((m) => m[1])
  .filter((url) => url.startsWith(prefix)).map((url) => "/" + url.slice(prefix.length));
if (listing.code !== 0 || paths.length === 0) {
  console.error(`deno publish --dry-run failed or listed nothing:\n${text}`);
  Deno.exit(1);
}

const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", root)));
const [scope, name] = (config.name as string).slice(1).split("/");
const version = config.version as string;
const exports = typeof config.exports === "string" ? { ".": config.exports } : config.exports;

const files = new Map<string, Uint8Array>();
const manifest: Record<string, { size: number; checksum: string }> = {};
for (const path of paths) {
  const bytes = await Deno.readFile(new URL(path.slice(1), root));
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  files.set(path, bytes);
  manifest[path] = { size: bytes.length, checksum: `sha256-${hex}` };
}

const base = `/@${scope}/${name}`;
const json = (value: unknown) =>
  new Response(JSON.stringify(value), { headers: { "content-type": "application/json" } });
const types: Record<string, string> = {
  ".ts": "application/typescript",
  ".json": "application/json",
  ".md": "text/markdown",
  ".so": "application/octet-stream",
};

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: Number(Deno.args[0] ?? 0),
  onListen: ({ port }) => console.log(`listening ${port} (${files.size} files)`),
}, (request) => {
  const path = decodeURIComponent(new URL(request.url).pathname);
  if (path === `${base}/meta.json`) {
    return json({ scope, name, latest: version, versions: { [version]: {} } });
  }
  if (path === `${base}/${version}_meta.json`) return json({ manifest, exports });
  const file = path.startsWith(`${base}/${version}/`)
    ? files.get(path.slice(`${base}/${version}`.length))
    : undefined;
  if (!file) return new Response("not in the package", { status: 404 });
  const type = types[path.slice(path.lastIndexOf("."))] ?? "text/plain";
  return new Response(file as Uint8Array<ArrayBuffer>, { headers: { "content-type": type } });
});
await server.finished;
