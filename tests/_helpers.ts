/**
 * Helpers shared by the CPU-side tests.
 *
 * @module
 */

/**
 * A sparse array whose prototype counts the lookups that fall through its
 * holes, and throws past `limit` of them (a walk by index would make a
 * billion).
 */
export function sparseArray(entries: [number, unknown][], limit = 100): unknown[] {
  const array: unknown[] = [];
  for (const [index, value] of entries) array[index] = value;
  let lookups = 0;
  const count = (key: string | symbol) => {
    if (typeof key === "string" && /^\d+$/.test(key) && ++lookups > limit) {
      throw new Error(`${lookups} lookups through holes: visited index by index`);
    }
  };
  Object.setPrototypeOf(
    array,
    new Proxy(Array.prototype, {
      get: (target, key, receiver) => (count(key), Reflect.get(target, key, receiver)),
      has: (target, key) => (count(key), Reflect.has(target, key)),
    }),
  );
  return array;
}

/** What `new Function` compiled while a callback ran. */
export interface Compiles<T> {
  /** The callback's result. */
  result: T;
  /** Calls of `Function` (with or without `new`). */
  count: number;
  /** Characters of the function bodies, all together and the longest. */
  sourceChars: number;
  longest: number;
}

/**
 * Runs `run` with the global `Function` replaced by one that counts what
 * it compiles (the walk's compiled code is made by `new Function`), then
 * puts the original back. Black-box: it counts for any version of the code.
 */
export function countingCompiles<T>(run: () => T): Compiles<T> {
  const original = globalThis.Function;
  let count = 0;
  let sourceChars = 0;
  let longest = 0;
  const counting = function (...args: string[]) {
    const body = String(args.at(-1) ?? "");
    count++;
    sourceChars += body.length;
    longest = Math.max(longest, body.length);
    return original(...args);
  };
  globalThis.Function = counting as unknown as FunctionConstructor;
  try {
    return { result: run(), count, sourceChars, longest };
  } finally {
    globalThis.Function = original;
  }
}

/**
 * Collects garbage until `done()` (a finalizer's effect) holds; throws
 * naming `what` after 5 s. Needs `--v8-flags=--expose-gc` (tests/run.sh).
 */
export async function collectUntil(done: () => boolean, what: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("the tests run with --v8-flags=--expose-gc");
  const deadline = performance.now() + 5_000;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`${what} did not happen in 5 s`);
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
