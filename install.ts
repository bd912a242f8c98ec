/**
 * Fetches, verifies and caches the native shim for this machine, without
 * loading it, then prints where it is: run it once where there is network
 * (a login node) so that nodes without network (GPU nodes that share the
 * home directory) find it in the cache.
 *
 * ```sh
 * deno run --allow-env=MTC_SHIM_PATH,XDG_CACHE_HOME,HOME \
 *   --allow-read="$HOME/.cache/mtc-core" --allow-write="$HOME/.cache/mtc-core" \
 *   --allow-net=jsr.io jsr:@mtc/core@0.3.0/install
 * ```
 *
 * Use the version your program imports: the cache is kept per version.
 * A missing permission is reported as the flags to add; the exit code is 1
 * on any failure.
 *
 * @module
 */

import { installShim, PACKAGE_VERSION, platformKey } from "./ffi/shim_file.ts";

try {
  const installed = await installShim();
  const what = `@mtc/core ${PACKAGE_VERSION}: the native shim for ${platformKey()}`;
  if (installed.origin === "checkout") {
    console.log(`${what} is the checkout's committed ${installed.path}; nothing to install`);
  } else {
    console.log(
      `${what} is ${
        installed.origin === "download" ? "now cached" : "already cached"
      } at ${installed.path} (SHA-256 verified, from ${installed.url}); imports of @mtc/core ${PACKAGE_VERSION} by this user load it without network`,
    );
  }
} catch (error) {
  console.error(`@mtc/core install: ${(error as Error).message}`);
  Deno.exit(1);
}
