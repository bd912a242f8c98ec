/**
 * Environment variables, read only where the permission is already granted:
 * reading an ungranted variable would prompt on a terminal (or throw), and
 * importing the library must do neither.
 *
 * @module
 */

/** The value of `name`, or undefined when unset or not granted. */
export function grantedEnv(name: string): string | undefined {
  const query = Deno.permissions.querySync({ name: "env", variable: name });
  return query.state === "granted" ? Deno.env.get(name) : undefined;
}
