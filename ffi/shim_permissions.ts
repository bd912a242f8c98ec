/**
 * The permissions the native shim needs, asked with `Deno.permissions.querySync`
 * before any call that needs them: such a call without its permission
 * prompts on a terminal (and blocks the import until someone answers), and
 * importing the package must never prompt. What is missing is reported all
 * at once, as the flags to add, written so that they work when pasted into
 * a shell (`"$HOME/..."`, never `~`, which no shell expands after `=`).
 *
 * @module
 */

/** A permission this process lacks, as the flag that grants it. */
export interface MissingPermission {
  /** The flag to add, e.g. `--allow-read="$HOME/.cache/mtc-core"`. */
  readonly flag: string;
  /** What it is for, e.g. `read the cached shim`. */
  readonly why: string;
}

/** Whether `descriptor` is granted; never prompts. */
export function granted(descriptor: Deno.PermissionDescriptor): boolean {
  return Deno.permissions.querySync(descriptor).state === "granted";
}

/** `text` as one shell word: as is where that is safe, else in double quotes. */
export function shellWord(text: string): string {
  if (/^[A-Za-z0-9_./,:@%+=-]+$/.test(text)) return text;
  return `"${quotedText(text)}"`;
}

/**
 * `text` escaped for the inside of double quotes, where a shell still
 * expands `$`, backquotes and `\` (and `"` ends the word): a `$` left as is
 * made a pasted flag name another path (`"/data/$run/cache"`).
 */
function quotedText(text: string): string {
  return text.replace(/["\\`$]/g, (c) => `\\${c}`);
}

/** `--allow-<name>=<path>`, quoted for a shell; `$HOME` is left for the shell to expand. */
export function pathFlag(name: "read" | "write", path: string): string {
  return path.startsWith("$HOME/")
    ? `--allow-${name}="$HOME/${quotedText(path.slice("$HOME/".length))}"`
    : `--allow-${name}=${shellWord(path)}`;
}

/**
 * The `--allow-ffi` entry when FFI is not granted without a path, or
 * `undefined` when it is. A path-scoped grant lets `Deno.dlopen` open the
 * file, but Deno's pointer functions (which the package uses to read the
 * shim's memory) need FFI without a path.
 */
export function missingFfi(path?: string): MissingPermission | undefined {
  if (granted({ name: "ffi" })) return undefined;
  if (path !== undefined && granted({ name: "ffi", path })) {
    return {
      flag: "--allow-ffi",
      why:
        "ffi without a path (a path-scoped --allow-ffi=<dir> opens the shim, but Deno's pointer functions, which @mtc/core uses, need --allow-ffi)",
    };
  }
  return { flag: "--allow-ffi", why: "ffi: load the shim" };
}

/**
 * One `Error` naming every missing permission, as flags to add.
 *
 * @param action what needs them, e.g. `"Loading the @mtc/core native shim"`
 */
export function missingPermissionsError(
  action: string,
  missing: readonly MissingPermission[],
): Error {
  const flags = missing.map((m) => m.flag).join(" ");
  const whys = missing.map((m) => m.why).join("; ");
  return new Error(`${action} needs permissions this process lacks: add ${flags} (${whys})`);
}
