/**
 * A signal raised whenever a pool gets memory back: the idle-release timer
 * starts on it, and copies waiting for memory are woken (on a macrotask: a
 * release can happen in the middle of another copy's bookkeeping, where
 * starting a copy would not be safe; Note [Copies that wait for memory] in
 * src/transfer/admission.ts). A module of its own so that the pools
 * need not import the timer and the admission queue, which import them.
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
