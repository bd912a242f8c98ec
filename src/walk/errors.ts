/**
 * The walk's errors: a rejection carries the path to where it was found,
 * filled in while the recursion unwinds and formatted once, short.
 *
 * @module
 */

/** A rejection found during the walk; the path is filled in while unwinding. */
export class WalkError {
  readonly path: (string | number)[] = [];
  /** `make` builds the error once the path is known. */
  constructor(readonly make: (path: string) => Error) {}
}

/** Path elements kept at each end of a long path in an error message. */
const PATH_ENDS = 8;

/** The path as `$.a[0]["b c"]`, eliding the middle of a long one. */
export function formatPath(path: readonly (string | number)[]): string {
  let text = "$";
  for (let i = 0; i < path.length; i++) {
    if (path.length > 3 * PATH_ENDS && i === PATH_ENDS) {
      // Deep paths would make messages of kilobytes: keep both ends.
      text += `…(${path.length - 2 * PATH_ENDS} more)…`;
      i = path.length - PATH_ENDS - 1;
      continue;
    }
    const key = path[i];
    text += typeof key === "number"
      ? `[${key}]`
      : /^[A-Za-z_$][\w$]*$/.test(key)
      ? `.${key}`
      : `[${JSON.stringify(key)}]`;
  }
  return text;
}

/** A key as a path element: Map keys need not be strings (nor convertible to one). */
export function pathKey(key: unknown): string | number {
  if (typeof key === "number" || typeof key === "string") return key;
  try {
    return String(key);
  } catch {
    return Object.prototype.toString.call(key);
  }
}

/** A compiled copy's error path: puts the key the failing child was under on it, and rethrows. */
export function rethrowUnder(error: unknown, key: string): never {
  if (error instanceof WalkError) error.path.unshift(pathKey(key));
  throw error;
}

/** The walk's rejections, each a {@linkcode WalkError} whose message names the path. */
export const rejected = {
  disposed: (): WalkError =>
    new WalkError((path) => new Error(`Cannot copy a disposed tensor at ${path}`)),
  shrunk: (): WalkError =>
    new WalkError((path) =>
      new TypeError(
        `Cannot copy a tensor whose buffer was detached or shrunk after Tensor.from() at ${path}`,
      )
    ),
  detached: (): WalkError =>
    new WalkError((path) => new TypeError(`Cannot copy a detached ArrayBuffer at ${path}`)),
  outOfBounds: (): WalkError =>
    new WalkError((path) =>
      new TypeError(`Cannot copy a view that no longer fits its resized ArrayBuffer at ${path}`)
    ),
  cyclic: (): WalkError =>
    new WalkError((path) => new TypeError(`Cannot copy a cyclic structure at ${path}`)),
  tooDeep: (max: number): WalkError =>
    new WalkError((path) =>
      new RangeError(`Cannot copy a structure nested deeper than ${max} containers at ${path}`)
    ),
};
