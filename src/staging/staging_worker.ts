/**
 * Worker entry: stages pieces of large pageable tensors into this worker's
 * own pinned slots and queues each piece's copy to the device, pipelined:
 * while the DMAs of earlier slots run, the next piece is copied into the
 * next slot.
 *
 * Messages in: `{ id, pieces: Float64Array }` with
 * {@linkcode PIECE_FIELDS} doubles per piece (device, destination address,
 * source address, bytes) and `{ close: true }`. Messages out: `{ ready: true }`
 * once the module is evaluated and its handler installed (nothing may be
 * posted to it before), `{ id, error?: WorkerError }` once every piece is queued,
 * and `{ closed: true }`.
 *
 * The pool (`worker_pool.ts`) imports this module statically, so that it is
 * part of the module graph that `deno cache` fetches (an offline machine can
 * then start the Workers); it installs its message handler only when it runs
 * as a Worker.
 *
 * @module
 */

import {
  CudaError,
  cudaError,
  eventCreate,
  eventDestroy,
  eventRecord,
  eventStatus,
  hostAlloc,
  hostFree,
  stageAndCopy,
} from "../../ffi/native.ts";

/** Bytes per pinned staging slot of a worker; a piece is at most this large. */
export const SLOT_BYTES = 2 * 1024 * 1024;

/** Doubles per piece in a message: device, destination, source, bytes. */
export const PIECE_FIELDS = 4;

interface Slot {
  device: number;
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
      device,
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
  while (
    (status = eventStatus(slot.device, slot.event)) === -1
  ) { /* spin: a 2 MiB DMA takes ~40 us */ }
  if (status !== 0) throw cudaError(status, `wait for a staging slot of cuda:${slot.device}`);
  slot.busy = false;
}

function stage(pieces: Float64Array): void {
  for (let i = 0, n = pieces.length / PIECE_FIELDS; i < n; i++) {
    const at = PIECE_FIELDS * i;
    const device = pieces[at];
    const ring = getSlots(device);
    const slot = ring[i % ring.length];
    waitIdle(slot);
    stageAndCopy({
      device,
      dst: pieces[at + 1],
      pinned: slot.address,
      src: pieces[at + 2],
      bytes: pieces[at + 3],
    });
    eventRecord(device, slot.event);
    slot.busy = true;
  }
}

/** A failure as it crosses back to the main thread (errors are not cloned with their class). */
export interface WorkerError {
  message: string;
  /** Set for a `CudaError`, so that the main thread can rebuild one. */
  cuda?: { code: number; cudaName: string; text: string; op: string };
}

/** A failure of this Worker as it crosses back to the main thread. */
export function describeWorkerError(error: unknown): WorkerError {
  if (error instanceof CudaError) {
    const { code, cudaName, op } = error;
    return { message: error.message, cuda: { code, cudaName, text: error.text, op } };
  }
  return { message: String(error instanceof Error ? error.message : error) };
}

/** The main thread's copy of a Worker's failure: a `CudaError` where it was one. */
export function workerFailure(error: WorkerError): Error {
  const cuda = error.cuda;
  return cuda
    ? new CudaError(cuda.code, cuda.cudaName, cuda.text, cuda.op)
    : new Error(error.message);
}

function onMessage(event: MessageEvent): void {
  const message = event.data;
  if (message.close) {
    for (const slots of slotsByDevice.values()) {
      for (const slot of slots) {
        waitIdle(slot);
        eventDestroy(slot.device, slot.event);
        hostFree(slot.address);
      }
    }
    slotsByDevice.clear();
    scope.postMessage({ closed: true });
    return;
  }
  try {
    stage(message.pieces);
    scope.postMessage({ id: message.id });
  } catch (error) {
    scope.postMessage({
      id: message.id,
      error: describeWorkerError(error),
    });
  }
}

// The worker global scope, typed here: this module is also loaded on the
// main thread (see above), whose global types are the window's.
interface WorkerScope {
  postMessage(message: unknown): void;
  onmessage: ((event: MessageEvent) => void) | null;
}
const scope = globalThis as unknown as WorkerScope;
const workerScopeClass = (globalThis as { WorkerGlobalScope?: abstract new () => unknown })
  .WorkerGlobalScope;
if (workerScopeClass !== undefined && globalThis instanceof workerScopeClass) {
  scope.onmessage = onMessage;
  // The pool posts nothing before this (see `PoolWorker.ready`).
  scope.postMessage({ ready: true });
}
