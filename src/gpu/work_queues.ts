/**
 * `StreamQueues`: the GPU works in flight, one queue per stream in launch
 * order, and their settling ("reaping") without a CPU wait.
 *
 * Works in flight are settled at each launch and each `startCopy` (and by
 * their own `ready()`/`done()`), so that a dropped work still gives its
 * holds back: per stream, oldest first, up to the first one still running
 * (work on one stream completes in order), so that a long kernel on one
 * stream does not keep the holds of finished work on the others.
 *
 * Its own file because this bookkeeping is independent of what a work is:
 * the queues ask each work only whether it is `ready()` (which settles it),
 * so they are specified with plain objects on any machine.
 *
 * @module
 */

import type { DeviceIndex } from "../device.ts";

/** What the queues ask of a work: whether it has settled (asking settles it). */
export interface Settles {
  /** True once the work has completed or failed; never blocks. */
  ready(): boolean;
}

/** The works in flight on one stream, in launch order (settled ones are skipped). */
interface StreamQueue<W> {
  readonly device: DeviceIndex;
  readonly stream: number;
  works: W[];
  head: number;
}

/**
 * The works in flight, by device and stream (library-internal: gpu/work.ts
 * keeps the one of the isolate).
 *
 * @example Work on one stream settles in order; streams do not wait for each other
 * ```ts
 * import assert from "node:assert/strict";
 * import { StreamQueues } from "./work_queues.ts";
 * const queues = new StreamQueues<{ ready(): boolean }>();
 * let asked = 0;
 * const running = { ready: () => (asked++, false) };
 * queues.add(running, 0, 0x10);
 * queues.add({ ready: () => true }, 0, 0x10); // behind running: not asked
 * queues.reap();
 * assert.equal(asked, 1);
 * assert.equal(queues.size, 2);
 * ```
 */
export class StreamQueues<W extends Settles> {
  /** Queues by device, then by stream address; `#list` holds the non-empty ones. */
  readonly #queues: Map<number, StreamQueue<W>>[] = [];
  readonly #list: StreamQueue<W>[] = [];

  /** Appends `work`, just queued on `stream` (an address) of `device`. */
  add(work: W, device: DeviceIndex, stream: number): void {
    const byStream = this.#queues[device] ??= new Map();
    let queue = byStream.get(stream);
    if (queue === undefined) {
      queue = { device, stream, works: [], head: 0 };
      byStream.set(stream, queue);
      this.#list.push(queue);
    }
    queue.works.push(work);
  }

  /** The works held, over every stream: on each, from the oldest not seen settled on. */
  get size(): number {
    let size = 0;
    for (const queue of this.#list) size += queue.works.length - queue.head;
    return size;
  }

  /**
   * Settles the works in flight whose events completed: on each stream,
   * oldest first, up to the first one still running (`everyOne`: asks them
   * all). One query per stream with work in flight, plus one per settled work.
   */
  reap(everyOne = false): void {
    const list = this.#list;
    for (let q = list.length - 1; q >= 0; q--) {
      const queue = list[q];
      const works = queue.works;
      let head = queue.head;
      while (head < works.length && works[head].ready()) head++;
      if (everyOne) { for (let i = head; i < works.length; i++) works[i].ready(); }
      if (head === works.length) {
        // Empty: forgotten (streams come and go).
        this.#queues[queue.device].delete(queue.stream);
        list[q] = list[list.length - 1];
        list.pop();
      } else if (head > 64 && head * 2 > works.length) {
        queue.works = works.slice(head);
        queue.head = 0;
      } else {
        queue.head = head;
      }
    }
  }
}
