/**
 * The command line of the A/B scripts (`ab_*.ts`): the old checkout's
 * directory (any directory holding `mod.ts` and `examples/`) and an
 * iteration count.
 *
 * @module
 */

/** What an A/B script was asked to compare. */
export interface AbArgs {
  /** The old checkout's root, as a directory URL. */
  oldRoot: URL;
  /** Iterations (the second argument, else the script's default). */
  iterations: number;
}

/**
 * Reads the arguments; without an old checkout prints what is needed and
 * exits with status 0, so that a bare run is harmless. (It loads neither
 * library: a script that needs a GPU asks the library it loads first, with
 * {@linkcode exitWithoutGpu}; a static import of the new one here loaded it
 * first in every process, whatever order the script chose.)
 *
 * @example
 * ```ts ignore
 * const { oldRoot, iterations } = abArgs(2000);
 * const old = await import(new URL("mod.ts", oldRoot).href);
 * exitWithoutGpu(old);
 * ```
 */
export function abArgs(defaultIterations: number): AbArgs {
  if (Deno.args.length === 0) {
    console.log("Needs the old checkout's directory as the first argument.");
    Deno.exit(0);
  }
  return {
    oldRoot: new URL(`${Deno.args[0].replace(/\/$/, "")}/`, `file://${Deno.cwd()}/`),
    iterations: Number(Deno.args[1] ?? defaultIterations),
  };
}

/** Exits with status 0, saying why, where `lib` (a loaded library) sees no CUDA device. */
export function exitWithoutGpu(lib: { deviceCount(): number }): void {
  if (lib.deviceCount() > 0) return;
  console.log("Needs a CUDA device and the old checkout's directory as the first argument.");
  Deno.exit(0);
}
