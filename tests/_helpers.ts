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
