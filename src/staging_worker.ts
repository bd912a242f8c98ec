/**
 * Worker entry: stages pieces of large pageable tensors into this worker's
 * own pinned slots and queues each piece's copy to the device, pipelined:
 * while the DMAs of earlier slots run, the next piece is copied into the
 * next slot.
 *
 * Messages in: `{ id, pieces: Float64Array }` with 4 doubles per piece
 * (device, destination address, source address, bytes) and `{ close: true }`.
 * Messages out: `{ id, error?: string }` once every piece is queued, and
 * `{ closed: true }`.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import {
  eventCreate,
  eventDestroy,
  eventRecord,
  eventStatus,
  hostAlloc,
  hostFree,
  stageAndCopy,
} from "../ffi/native.ts";
import { SLOT_BYTES } from "./worker_pool.ts";

interface Slot {
  address: number;
  event: number;
  busy: boolean;
}

// Four slots per target device, so a worker keeps several pieces queued on
// the shared stream while it copies the next; a slot's event must belong to
// the device whose stream records it.
const slotsByDevice = new Map<number, Slot[]>();

function getSlots(device: number): Slot[] {
  let slots = slotsByDevice.get(device);
  if (!slots) {
    slots = [0, 1, 2, 3].map(() => ({
      address: hostAlloc(SLOT_BYTES),
      event: eventCreate(device),
      busy: false,
    }));
    slotsByDevice.set(device, slots);
  }
  return slots;
}

function waitIdle(slot: Slot): void {
  if (!slot.busy) return;
  // Blocking this worker's thread is the point: the main thread stays free.
  let status: number;
  while ((status = eventStatus(slot.event)) === -1) { /* spin: a 2 MiB DMA takes ~40 us */ }
  if (status !== 0) throw new Error(`CUDA error ${status} while waiting for a staging slot`);
  slot.busy = false;
}

function stage(pieces: Float64Array): void {
  for (let i = 0, n = pieces.length / 4; i < n; i++) {
    const device = pieces[4 * i];
    const ring = getSlots(device);
    const slot = ring[i % ring.length];
    waitIdle(slot);
    stageAndCopy(device, pieces[4 * i + 1], slot.address, pieces[4 * i + 2], pieces[4 * i + 3]);
    eventRecord(device, slot.event);
    slot.busy = true;
  }
}

self.onmessage = (event: MessageEvent) => {
  const message = event.data;
  if (message.close) {
    for (const slots of slotsByDevice.values()) {
      for (const slot of slots) {
        waitIdle(slot);
        eventDestroy(slot.event);
        hostFree(slot.address);
      }
    }
    slotsByDevice.clear();
    self.postMessage({ closed: true });
    return;
  }
  try {
    stage(message.pieces);
    self.postMessage({ id: message.id });
  } catch (error) {
    self.postMessage({
      id: message.id,
      error: String(error instanceof Error ? error.message : error),
    });
  }
};
