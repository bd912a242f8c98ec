/**
 * Serves this checkout's files over HTTP on 127.0.0.1, as a remote import
 * reaches the package (`http://127.0.0.1:<port>/mod.ts`), for tests that
 * import it in a child process. `shim` decides how the prebuilt shim's
 * request is answered: served, served with one byte changed (a corrupted
 * download), or held until the server closes.
 *
 * @module
 */

const root = new URL("../../", import.meta.url);

/** How the server answers the request for the prebuilt shim. */
export type ShimAnswer = "serve" | "corrupt" | "never";

/** A running package server. */
export interface PackageServer {
  /** `http://127.0.0.1:<port>/`. */
  readonly url: string;
  /** `127.0.0.1:<port>` (for `--allow-import`). */
  readonly host: string;
  /** Requests for the shim so far. */
  shimRequests(): number;
  /** Stops the server (answering every held request first). */
  close(): Promise<void>;
}

/** Starts a server for this checkout's files. */
export function servePackage(shim: ShimAnswer = "serve"): PackageServer {
  let shimRequests = 0;
  let release!: () => void;
  const closing = new Promise<void>((resolve) => release = resolve);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      const path = decodeURIComponent(new URL(request.url).pathname);
      if (path.includes("..")) return new Response("", { status: 400 });
      if (path.startsWith("/native/prebuilt/")) {
        shimRequests++;
        if (shim === "never") {
          await closing;
          return new Response("", { status: 503 });
        }
      }
      try {
        const body = await Deno.readFile(new URL(path.slice(1), root));
        if (shim === "corrupt" && path.startsWith("/native/prebuilt/")) body[body.length >> 1] ^= 1;
        return new Response(body, {
          headers: { "content-type": path.endsWith(".ts") ? "application/typescript" : "" },
        });
      } catch {
        return new Response("", { status: 404 });
      }
    },
  );
  const host = `127.0.0.1:${server.addr.port}`;
  return {
    url: `http://${host}/`,
    host,
    shimRequests: () => shimRequests,
    async close() {
      release();
      await server.shutdown();
    },
  };
}
