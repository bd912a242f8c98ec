/**
 * A signal raised whenever a pool gets memory back: copies waiting for
 * memory retry, and the idle-release timer starts.
 *
 * @module
 */

const listeners: (() => void)[] = [];

/** Calls `listener` after every release of pooled memory (keep it cheap). */
export function onMemoryReleased(listener: () => void): void {
  listeners.push(listener);
}

/** Raised by the pools after a release. */
export function memoryReleased(): void {
  for (let i = 0; i < listeners.length; i++) listeners[i]();
}
