/**
 * The command line of the A/B scripts (`ab_*.ts`): the old checkout's
 * directory (any directory holding `mod.ts` and `examples/`) and an
 * iteration count.
 *
 * @module
 */

import { deviceCount } from "../mod.ts";

/** What an A/B script was asked to compare. */
export interface AbArgs {
  /** The old checkout's root, as a directory URL. */
  oldRoot: URL;
  /** Iterations (the second argument, else the script's default). */
  iterations: number;
}

/**
 * Reads the arguments; without an old checkout (or a CUDA device, where
 * `needsGpu`) prints what is needed and exits with status 0, so that a bare
 * run is harmless.
 *
 * @example
 * ```ts ignore
 * const { oldRoot, iterations } = abArgs(2000, { needsGpu: true });
 * const old = await import(new URL("mod.ts", oldRoot).href);
 * ```
 */
export function abArgs(defaultIterations: number, { needsGpu }: { needsGpu: boolean }): AbArgs {
  if ((needsGpu && deviceCount() === 0) || Deno.args.length === 0) {
    console.log(
      `Needs ${
        needsGpu ? "a CUDA device and " : ""
      }the old checkout's directory as the first argument.`,
    );
    Deno.exit(0);
  }
  return {
    oldRoot: new URL(`${Deno.args[0].replace(/\/$/, "")}/`, `file://${Deno.cwd()}/`),
    iterations: Number(Deno.args[1] ?? defaultIterations),
  };
}
