/**
 * `shown`: a value as an error message shows it, without ever throwing.
 *
 * @module
 */

/**
 * `value` for an error message: primitives as `String` writes them (`-0`
 * as "-0", a Symbol as `Symbol(name)`), objects and functions as their
 * class's name in parentheses. Never throws: validating an argument must
 * not fail on building its message (`String()` throws for a Symbol, an
 * object without a prototype, one whose `toString` throws, a revoked
 * Proxy).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { shown } from "./shown.ts";
 * assert.equal(shown(Object.create(null)), "(an object)");
 * assert.equal(shown(new Map()), "(Map)");
 * assert.equal(shown(-0), "-0");
 * assert.equal(shown(Symbol("s")), "Symbol(s)");
 * ```
 */
export function shown(value: unknown): string {
  if (typeof value === "object" && value !== null || typeof value === "function") {
    let name: unknown;
    try {
      name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    } catch {
      // A Proxy whose trap throws, or a revoked one.
    }
    if (typeof value === "function") return "(a function)";
    return typeof name === "string" && name !== "" ? `(${name})` : "(an object)";
  }
  if (typeof value === "symbol") return value.toString();
  return Object.is(value, -0) ? "-0" : String(value);
}
