/**
 * Gates: the GPU-side wait for a copy that is not queued yet.
 *
 * Note [Gates]
 * ~~~~~~~~~~~~
 * A copy that stages tensors of 1 MiB and more in the background, or waits
 * for memory under the limits, queues its last transfers (and records its
 * completion events) only later. A stream ordered after it before then
 * waits for a gate: a 32-bit word in pinned, device-mapped host memory that
 * the stream waits on (`cuStreamWaitValue32`, "until the word reaches the
 * gate's value"). Once the copy is queued, a library gate stream waits for
 * the copy's events and writes the value (`cuStreamWriteValue32`), so the
 * waiting stream goes on when the GPU has finished the copy; the CPU never
 * waits. A copy that fails before it is queued opens its gate from the CPU
 * (the waiting work then reads unspecified bytes; the copy's `get()`
 * rejects), and so does a copy whose gate write the driver refused, once it
 * has settled.
 *
 * Values only grow (the GPU compares them cyclically), so a word is reused
 * as soon as the CPU has seen it reach its value: a wait for an older value
 * that runs late still passes. No event is handed out and nothing is
 * allocated per wait but a marker event, recorded after the wait on the
 * waiting stream, which says when no queued wait reads the word anymore
 * (at exit, the words' memory is freed only then).
 *
 * Only streams that are not the library's copy streams wait for gates: a
 * copy stream that waited for a copy not yet queued would hold back the
 * copy's own transfers, queued later on that same stream (see `after.ts`,
 * which defers such orderings instead).
 *
 * While a gate is closed, the thread that queues its copy must not wait for
 * the device: the driver calls that do (`cuMemFreeHost`, module loads and
 * unloads; measured) would wait for the gated stream, which waits for that
 * thread. So each gate holds such calls of the library (ffi/native.ts)
 * until its copy has settled (the gate is open, or about to be: its write
 * waits only for finished work), and the first gate loads ahead what the
 * library would load later (the gather kernels). A kernel's first lookup
 * (`cuModuleGetFunction`, with the driver's lazy loading) is worse: it holds
 * every stream of the device behind the gated one (measured), the copy's
 * transfers included; so `module.kernel()` refuses while a gate is closed
 * anywhere in the process, and `loadModule` waits until this isolate's
 * gates are open. User code that makes such calls itself must not make them
 * while a copy it ordered work after is not queued yet.
 *
 * @module
 */

import {
  driverStatus,
  eventRecordOn,
  eventStatus,
  gatesClosedInProcess,
  gateSet,
  gateSupport,
  gateWait,
  gateWrite,
  holdSynchronizingCalls,
  hostAlloc,
  hostFree,
  releaseSynchronizingCalls,
  streamCreate,
  streamWaitEvent,
} from "../../ffi/native.ts";
import { acquireEvent, releaseEvent } from "../memory/event_pool.ts";

/** Bytes of gate words allocated at once. */
const PAGE_BYTES = 4096;

interface Word {
  readonly address: number;
  /** The value of its latest gate (0: none yet). */
  value: number;
}

const pages: number[] = [];
const free: Word[] = [];
/** Gates whose value was written from a stream, until the CPU sees it reached. */
const opening: Gate[] = [];
const closed = new Set<Gate>();
/** Markers recorded after gate waits, until they complete. */
const markers: { device: number; event: number }[] = [];
const supported: (boolean | undefined)[] = [];
const gateStreams: number[] = [];

/**
 * Whether streams of `device` can wait for gates (CUDA 11.7+ drivers; see
 * native/gates.c). The first answer for a device loads its gather kernel.
 */
export function gatesSupported(device: number): boolean {
  return supported[device] ??= gateSupport(device);
}

/** Before the first gate closes: every device has loaded what it would load later. */
function prepareDevices(): void {
  const count = driverStatus().deviceCount;
  for (let device = 0; device < count; device++) gatesSupported(device);
}
let prepared = false;

/** Whether the word's value `value` has reached `target`, compared cyclically as the GPU does. */
function reached(value: number, target: number): boolean {
  return ((value - target) | 0) >= 0;
}

function takeWord(): Word {
  for (let i = opening.length - 1; i >= 0; i--) {
    const gate = opening[i];
    if (reached(gateSet(gate.word.address, -1), gate.value)) {
      opening.splice(i, 1);
      free.push(gate.word);
    }
  }
  reapMarkers();
  const word = free.pop();
  if (word) return word;
  const page = hostAlloc(PAGE_BYTES);
  pages.push(page);
  for (let offset = PAGE_BYTES - 4; offset > 0; offset -= 4) {
    free.push({ address: page + offset, value: gateSet(page + offset, 0) });
  }
  return { address: page, value: gateSet(page, 0) };
}

function reapMarkers(): void {
  for (let i = markers.length - 1; i >= 0; i--) {
    const { device, event } = markers[i];
    const status = eventStatus(device, event);
    if (status === -1) continue;
    markers.splice(i, 1);
    // A marker that failed (a broken context) is not reused.
    if (status === 0) releaseEvent(device, event);
  }
}

/**
 * One gate: streams wait for it until it is opened, from a stream after
 * events, or from the CPU.
 */
export class Gate {
  readonly word: Word;
  readonly value: number;
  #open = false;
  #holding = true;

  /** A closed gate on a word of the pool; it holds the calls that wait for the device. */
  constructor() {
    if (!prepared) {
      prepareDevices();
      prepared = true;
    }
    this.word = takeWord();
    this.value = (this.word.value + 1) >>> 0 || 1;
    this.word.value = this.value;
    closed.add(this);
    gatesClosedInProcess(1);
    holdSynchronizingCalls();
  }

  /** Marks it open (its value written, or its write queued after its copy's work). */
  #opened(): void {
    this.#open = true;
    closed.delete(this);
    gatesClosedInProcess(-1);
    if (closed.size === 0) { for (const resolve of whenOpen.splice(0)) resolve(); }
  }

  /** Whether it was opened (the value written, or its write queued). */
  get opened(): boolean {
    return this.#open;
  }

  /** Makes `stream` of `device` wait on the GPU until the gate opens; returns at once. */
  waitOn(device: number, stream: number): void {
    gateWait(device, stream, this.word.address, this.value);
    const event = acquireEvent(device);
    try {
      eventRecordOn(device, stream, event);
    } catch (error) {
      releaseEvent(device, event);
      throw error;
    }
    markers.push({ device, event });
  }

  /**
   * Opens the gate from the gate stream of `device` once `events` have
   * completed (on the GPU); from the CPU where there are none.
   *
   * @throws {CudaError} when the driver refuses (the gate stays closed)
   */
  openAfter(device: number, events: readonly { device: number; event: number }[]): void {
    if (this.#open) return;
    if (events.length === 0) return this.openNow();
    const stream = gateStreams[device] ??= streamCreate(device);
    for (let i = 0; i < events.length; i++) streamWaitEvent(device, stream, events[i].event);
    gateWrite(device, stream, this.word.address, this.value);
    this.#opened();
    opening.push(this);
  }

  /** Opens the gate from the CPU now. */
  openNow(): void {
    if (!this.#open) {
      gateSet(this.word.address, this.value);
      this.#opened();
      free.push(this.word);
    }
    this.release();
  }

  /**
   * Once the copy has settled (the gate is open, or its write waits only
   * for finished work): the calls that wait for the device may run again.
   */
  release(): void {
    if (!this.#holding) return;
    this.#holding = false;
    releaseSynchronizingCalls();
  }
}

const whenOpen: (() => void)[] = [];

/** Whether a gate is closed anywhere in the process (some stream waits for a copy not queued yet). */
export function anyGateClosed(): boolean {
  return closed.size > 0 || gatesClosedInProcess() > 0;
}

/** `undefined` when no gate of this isolate is closed; else a Promise of when none is. */
export function gatesOpen(): Promise<void> | undefined {
  if (closed.size === 0) return undefined;
  return new Promise((resolve) => whenOpen.push(resolve));
}

/**
 * At exit: opens the gates still closed from the CPU (no stream is left
 * waiting for a copy that will never be queued), and frees the words'
 * memory once no queued wait reads it.
 */
function releaseAtExit(): void {
  try {
    for (const gate of [...closed]) gate.openNow();
    for (const gate of opening) gate.release();
    reapMarkers();
    if (markers.length > 0) return; // a wait may still read them: the process reclaims them
    for (const page of pages) hostFree(page);
    pages.length = free.length = opening.length = 0;
  } catch {
    // The process is ending; the driver reclaims what could not be freed.
  }
}

globalThis.addEventListener("unload", releaseAtExit);
