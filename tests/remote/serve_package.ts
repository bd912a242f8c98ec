/**
 * Serves exactly the files `deno publish --dry-run` lists (what JSR would
 * publish) over HTTP on 127.0.0.1, as a remote import reaches the package.
 * Prints `listening <port>` once ready; serves until killed.
 *
 * Run by `tests/remote/run.sh`:
 * `deno run --allow-net=127.0.0.1 --allow-read --allow-run serve_package.ts`
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
const files = new Set(
  [...text.matchAll(/(file:\/\/\S+)/g)].map((m) => m[1]).filter((url) => url.startsWith(prefix))
    .map((url) => "/" + url.slice(prefix.length)),
);
if (listing.code !== 0 || files.size === 0) {
  console.error(`deno publish --dry-run failed or listed nothing:\n${text}`);
  Deno.exit(1);
}

const types: Record<string, string> = {
  ".ts": "application/typescript",
  ".json": "application/json",
  ".so": "application/octet-stream",
};
const server = Deno.serve({
  hostname: "127.0.0.1",
  port: Number(Deno.args[0] ?? 0),
  onListen: ({ port }) => console.log(`listening ${port} (${files.size} files)`),
}, async (request) => {
  const path = decodeURIComponent(new URL(request.url).pathname);
  if (!files.has(path)) return new Response("not in the package", { status: 404 });
  const type = types[path.slice(path.lastIndexOf("."))] ?? "text/plain";
  return new Response(await Deno.readFile(new URL(path.slice(1), root)), {
    headers: { "content-type": type },
  });
});
await server.finished;
