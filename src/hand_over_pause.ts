/**
 * The pause of a walk that takes leaves ahead of the route (packed_walk.ts,
 * mirror_walk.ts): after a few hand-overs in a row it is not tried for a
 * number of copies, since a structure that always holds a leaf it cannot
 * take would otherwise pay for the hand-over on every copy.
 *
 * @module
 */

/**
 * Counts copies and hand-overs; {@linkcode HandOverPause.next} says
 * whether the next copy's walk may run.
 *
 * @example Two hand-overs in a row pause the walk for 64 copies
 * ```ts
 * import assert from "node:assert/strict";
 * import { HandOverPause } from "./hand_over_pause.ts";
 * const pause = new HandOverPause(2, 64);
 * assert.ok(pause.next());
 * pause.failed();
 * pause.failed();
 * let paused = 0;
 * while (!pause.next()) paused++;
 * assert.equal(paused, 63);
 * ```
 */
export class HandOverPause {
  #failures = 0;
  #skipUntil = 0;
  #copies = 0;
  readonly #failuresBeforeSkip: number;
  readonly #skipCopies: number;

  /** Pauses for `skipCopies` copies after `failuresBeforeSkip` hand-overs in a row. */
  constructor(failuresBeforeSkip: number, skipCopies: number) {
    this.#failuresBeforeSkip = failuresBeforeSkip;
    this.#skipCopies = skipCopies;
  }

  /** Counts a copy; whether its walk may run. */
  next(): boolean {
    return ++this.#copies >= this.#skipUntil;
  }

  /** A walk took every leaf: the run of hand-overs ends. */
  succeeded(): void {
    this.#failures = 0;
  }

  /** A walk handed over. */
  failed(): void {
    if (++this.#failures >= this.#failuresBeforeSkip) {
      this.#skipUntil = this.#copies + this.#skipCopies;
    }
  }

  /** For tests: forgets past hand-overs and the pause after them. */
  reset(): void {
    this.#failures = this.#skipUntil = 0;
  }
}
