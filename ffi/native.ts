/**
 * Typed, checked wrappers over the shim. The only file that reads
 * `lib.symbols`: everything above it sees numbers and {@linkcode CudaError}.
 *
 * @module
 */

import { getLibrary, type ShimLibrary } from "./library.ts";

/** CUDA_ERROR_NOT_READY: an event or stream still has work pending. */
const CUDA_NOT_READY = 600;

/**
 * A CUDA driver call failed. The message names the operation and the CUDA
 * error, e.g. `Cannot allocate 4096 bytes of device memory on cuda:0:
 * CUDA_ERROR_OUT_OF_MEMORY (2): out of memory`.
 *
 * @example Telling CUDA failures apart from argument errors
 * ```ts
 * import { CudaError, startCopy } from "@mtc/core";
 * import assert from "node:assert/strict";
 * async function copy(batch: unknown, device: string): Promise<string> {
 *   try {
 *     await startCopy(batch, device).get();
 *     return "copied";
 *   } catch (error) {
 *     // A copy that failed on the GPU rejects with a CudaError naming the driver's error.
 *     if (error instanceof CudaError) return `CUDA failed: ${error.cudaName} (${error.op})`;
 *     // Bad arguments throw TypeError or RangeError, before anything starts.
 *     if (error instanceof TypeError || error instanceof RangeError) return "bad argument";
 *     throw error;
 *   }
 * }
 * assert.equal(await copy([new Float32Array(2)], "cpu"), "copied");
 * assert.equal(await copy([new Float32Array(2)], "gpu0"), "bad argument");
 * const error = new CudaError(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "allocate 4 bytes");
 * assert.ok(error instanceof CudaError && error instanceof Error);
 * assert.equal(error.message, "Cannot allocate 4 bytes: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
 * ```
 */
export class CudaError extends Error {
  /** The numeric status (a `CUresult`, or an `MTC_E_*` code of the shim above 100000). */
  readonly code: number;
  /** The CUDA error name, e.g. `"CUDA_ERROR_OUT_OF_MEMORY"`. */
  readonly cudaName: string;
  /** What was being done, e.g. `"allocate 4096 bytes of device memory"`. */
  readonly op: string;
  /** The CUDA error's description, e.g. `"out of memory"`. */
  readonly text: string;

  /** Creates the error; normally thrown by the wrappers of this module. */
  constructor(code: number, cudaName: string, text: string, op: string) {
    super(`Cannot ${op}: ${cudaName} (${code}): ${text}`);
    this.text = text;
    this.name = "CudaError";
    this.code = code;
    this.cudaName = cudaName;
    this.op = op;
  }
}

let lib: ShimLibrary["symbols"] | undefined;
function sym(): ShimLibrary["symbols"] {
  return lib ??= getLibrary().symbols;
}

const out = new Float64Array(4);
const statusOut = new Int32Array(3);

function cString(pointer: Deno.PointerValue): string {
  return pointer === null ? "unknown error" : Deno.UnsafePointerView.getCString(pointer);
}

/** Builds the error for a failed status without throwing it. */
export function cudaError(status: number, op: string): CudaError {
  const s = sym();
  return new CudaError(
    status,
    cString(s.mtc_error_name(status)),
    cString(s.mtc_error_string(status)),
    op,
  );
}

function check(status: number, op: string | (() => string)): void {
  if (status !== 0) {
    throw cudaError(status, typeof op === "string" ? op : op());
  }
}

/** What the shim found of the CUDA driver (see `mtc_cuda_status`). */
export interface DriverStatus {
  /** 0 when CUDA is usable (with 0 or more devices), else why not. */
  readonly status: number;
  /** The error's name, e.g. `"MTC_ERROR_NO_DRIVER"` (`""` when status is 0). */
  readonly name: string;
  /** The error's text. */
  readonly text: string;
  /** The dynamic loader's message, or a missing entry point's name. */
  readonly detail: string;
  /** The driver's CUDA version as `cuDriverGetVersion` writes it (12040), 0 when unknown. */
  readonly driverVersion: number;
  /** The oldest driver version the shim accepts. */
  readonly minDriverVersion: number;
  /** Usable devices. */
  readonly deviceCount: number;
}

/** Shim status code: an invalid argument, e.g. a buffer detached before the call (native/driver.h). */
export const MTC_E_BAD_ARGUMENT = 100002;
/** Shim status code: libcuda.so.1 cannot be loaded (native/driver.h). */
export const MTC_E_NO_DRIVER = 100003;
/** Shim status code: the driver is older than the shim accepts. */
export const MTC_E_DRIVER_TOO_OLD = 100004;
/** Shim status code: background staging was stopped (its isolate or the process is ending). */
export const MTC_E_STOPPED = 100006;

/**
 * Loads the CUDA driver (once) and says what it found.
 *
 * @throws {Error} only when the shim itself is not loaded
 */
export function driverStatus(): DriverStatus {
  const s = sym();
  const status = s.mtc_cuda_status(statusOut);
  return {
    status,
    name: status === 0 ? "" : cString(s.mtc_error_name(status)),
    text: status === 0 ? "" : cString(s.mtc_error_string(status)),
    detail: cString(s.mtc_cuda_status_detail()),
    driverVersion: statusOut[0],
    deviceCount: statusOut[1],
    minDriverVersion: statusOut[2],
  };
}

/** Allocates page-locked, mapped host memory; returns its address. */
export function hostAlloc(bytes: number): number {
  check(
    sym().mtc_host_alloc(bytes, out),
    () => `allocate ${bytes} bytes of pinned host memory`,
  );
  return out[0];
}

/** Frees memory from {@linkcode hostAlloc}. No JS view of it may remain. */
export function hostFree(address: number): void {
  check(sym().mtc_host_free(address), "free pinned host memory");
}

/** Stream-ordered device allocation on the library stream of `device`. */
export function deviceAlloc(device: number, bytes: number): number {
  check(
    sym().mtc_device_alloc(device, bytes, out),
    () => `allocate ${bytes} bytes of device memory on cuda:${device}`,
  );
  return out[0];
}

/** Stream-ordered free of memory from {@linkcode deviceAlloc}. */
export function deviceFree(device: number, address: number): void {
  check(
    sym().mtc_device_free(device, address),
    () => `free device memory on cuda:${device}`,
  );
}

/**
 * Gives the device memory freed so far back to the OS (it stays in the
 * device's stream-ordered pool otherwise). Waits for the library stream.
 */
export function deviceReleaseUnused(device: number): void {
  check(
    sym().mtc_device_release_unused(device),
    () => `give unused device memory of cuda:${device} back`,
  );
}

/** Creates a CUDA event of `device`, without timing; returns its handle. */
export function eventCreate(device: number): number {
  check(sym().mtc_event_create(device, out), () => `create a CUDA event on cuda:${device}`);
  return out[0];
}

/** Records `event` on the library stream of `device`. */
export function eventRecord(device: number, event: number): void {
  check(
    sym().mtc_event_record(device, event),
    () => `record a CUDA event on cuda:${device}`,
  );
}

/**
 * Returns 0 when the event completed, -1 while pending, or the CUDA status
 * of a failure (never throws, so that `ready()` can call it).
 */
export function eventStatus(device: number, event: number): number {
  const status = sym().mtc_event_query(device, event);
  return status === CUDA_NOT_READY ? -1 : status;
}

/** Waits for `event` of `device` on a Deno blocking-pool thread; 0 or a CUDA status. */
export function eventSynchronizeOffThread(device: number, event: number): Promise<number> {
  return sym().mtc_event_synchronize_nonblocking(device, event);
}

/** A copy between two CUDA-visible addresses (pinned host or device memory). */
export interface AsyncCopy {
  /** The device whose library stream queues it. */
  device: number;
  dst: number;
  src: number;
  bytes: number;
  /** An event of `device` to record after it, or 0 / absent for none. */
  event?: number;
}

/** Queues a copy on the library stream of `copy.device`, then records `copy.event`. */
export function copyAsync({ device, dst, src, bytes, event = 0 }: AsyncCopy): void {
  const status = sym().mtc_copy_async(device, dst, src, bytes, event);
  if (status !== 0) throw cudaError(status, `copy ${bytes} bytes on cuda:${device}`);
}

/** Copies a JS buffer's bytes to device memory (pageable source, snapshotted before return). */
export function copyFromBuffer(
  { device, dst, src }: { device: number; dst: number; src: ArrayBufferView },
): void {
  check(
    sym().mtc_copy_from_buffer(device, dst, src, 0, src.byteLength),
    () => `copy ${src.byteLength} bytes from host to cuda:${device}`,
  );
}

/** Creates a stager of `device`: `slots` pinned slots of `slotBytes`; returns its handle. */
export function stagerCreate(device: number, slots: number, slotBytes: number): number {
  check(
    sym().mtc_stager_create(device, slots, slotBytes, out),
    () => `allocate ${slots} × ${slotBytes} bytes of pinned staging memory for cuda:${device}`,
  );
  return out[0];
}

/**
 * Stops `stager` for good (when its isolate ends): a staging call on it that
 * starts later fails with {@linkcode MTC_E_STOPPED}, a running one stops
 * before its next slot. True once none runs; false if one still runs after
 * `timeoutMs`.
 */
export function stagerStop(stager: number, timeoutMs: number): boolean {
  return sym().mtc_stager_stop(stager, timeoutMs) === 0;
}

/** Waits for a stager's queued copies and frees it. */
export function stagerDestroy(stager: number): void {
  check(sym().mtc_stager_destroy(stager), "free pinned staging memory");
}

/** One range of a JS buffer to stage to device memory. */
export interface StagedRange {
  /** The stager (from {@linkcode stagerCreate}) the call uses alone. */
  stager: number;
  /** Device address the range goes to. */
  dst: number;
  /** The source: a view whose memory Deno keeps alive for the call. */
  src: ArrayBufferView;
  /** Byte offset in `src` and bytes to copy. */
  offset: number;
  bytes: number;
}

/**
 * Stages a range of a JS buffer through a stager's pinned slots and queues
 * its copies, on a Deno blocking-pool thread; resolves with 0 once every
 * piece is queued, or a status. Deno holds `src`'s memory for the call, so
 * detaching it meanwhile cannot make the copy read freed memory; a buffer
 * detached before the call starts gives `MTC_E_BAD_ARGUMENT`. Resizable
 * buffers are refused by Deno (stage those on the calling thread).
 */
export function stageBufferOffThread(
  { stager, dst, src, offset, bytes }: StagedRange,
): Promise<number> {
  return sym().mtc_stage_buffer_nonblocking(stager, dst, src, offset, bytes);
}

/**
 * The address of `view`'s first byte (0 for a detached or empty view),
 * through one call on Deno's fast path. Valid only while nothing can detach
 * or free the buffer: the caller uses it before returning to the event loop.
 */
export function viewAddress(view: ArrayBufferView): number {
  return sym().mtc_address_of(view);
}

/**
 * Host copies of `count` pieces listed in `table` (source address,
 * destination address, bytes; three doubles each), shared by up to
 * `threads` threads, the calling one included; returns once all are done.
 * Every source must stay in place until then: JavaScript is blocked during
 * the call, so only the caller's own code between {@linkcode viewAddress} and
 * this call could move one.
 */
export function copyPieces(table: Float64Array, count: number, threads: number): void {
  check(sym().mtc_copy_pieces(table, count, threads), () => `copy ${count} pieces on the host`);
}

/** A peer copy across devices and the two events that fence it. */
export interface PeerCopy {
  dstDevice: number;
  dst: number;
  srcDevice: number;
  src: number;
  bytes: number;
  /**
   * Scratch events: `beforeCopy` (of `dstDevice`) orders the copy after the
   * destination's queued work; `afterCopy` (of `srcDevice`) orders the
   * destination's later work after the copy.
   */
  fences: { beforeCopy: number; afterCopy: number };
}

/** Peer copy across devices, ordered with both library streams. */
export function copyPeer({ dstDevice, dst, srcDevice, src, bytes, fences }: PeerCopy): void {
  check(
    sym().mtc_copy_peer(dstDevice, dst, srcDevice, src, bytes, fences.beforeCopy, fences.afterCopy),
    () => `copy ${bytes} bytes from cuda:${srcDevice} to cuda:${dstDevice}`,
  );
}

/** A device-side gather (see {@linkcode gather}). */
export interface Gather {
  /** The device the tensors live on. */
  device: number;
  /** Address of the table (pinned, mapped; 3 doubles per entry: source, offset in `dst`, bytes). */
  table: number;
  /** Entries in the table. */
  count: number;
  /** The packed buffer on `device`. */
  dst: number;
  /** Where to copy `bytes` of `dst` afterwards (host or device), 0 / absent for no copy. */
  hostDst?: number;
  bytes?: number;
  /** An event of `device` to record at the end, 0 / absent for none. */
  event?: number;
}

/**
 * Gathers the tensors listed in the table into `dst` with one kernel (or
 * one copy per entry where the driver cannot load the device code), then
 * optionally copies the packed bytes on and records an event, all on the
 * library stream of `device`.
 */
export function gather(
  { device, table, count, dst, hostDst = 0, bytes = 0, event = 0 }: Gather,
): void {
  check(
    sym().mtc_gather(device, table, count, dst, hostDst, bytes, event),
    () => `gather ${count} tensors on cuda:${device}`,
  );
}

/** Waits for all work queued on the library stream of `device`. */
export function streamSynchronize(device: number): void {
  check(
    sym().mtc_stream_synchronize(device),
    () => `synchronize the stream of cuda:${device}`,
  );
}

/**
 * An ArrayBuffer over native memory the shim owns (no copy, no deleter): it
 * must not be used after that memory is freed; detach it first.
 */
export function hostArrayBuffer(address: number, bytes: number): ArrayBuffer {
  const pointer = Deno.UnsafePointer.create(BigInt(address));
  if (pointer === null) throw new TypeError("Cannot view a null address");
  return Deno.UnsafePointerView.getArrayBuffer(pointer, bytes);
}

/** A PointerValue for an address (null for 0), for `Tensor.ptr`. */
export function pointerOf(address: number): Deno.PointerValue {
  return address === 0 ? null : Deno.UnsafePointer.create(BigInt(address));
}

/** A PointerValue to a view's first byte (null when empty); keeps the view alive. */
export function pointerOfView(view: ArrayBufferView): Deno.PointerValue {
  return view.byteLength === 0 ? null : Deno.UnsafePointer.of(view);
}

/** Shim status code: a stream of another device or context (native/driver.h). */
export const MTC_E_WRONG_DEVICE = 100007;

/** Which library stream of a device: the copy stream or the default compute stream. */
export type LibraryStream = "copy" | "compute";

/** The handle of a library stream of `device` (the compute stream is created on first use). */
export function libraryStream(device: number, which: LibraryStream): number {
  check(
    sym().mtc_stream_library(device, which === "copy" ? 0 : 1, out),
    () => `create the ${which} stream of cuda:${device}`,
  );
  return out[0];
}

/** Creates a non-blocking stream of `device`; returns its handle. */
export function streamCreate(device: number): number {
  check(sym().mtc_stream_create(device, out), () => `create a CUDA stream on cuda:${device}`);
  return out[0];
}

/** Destroys a stream from {@linkcode streamCreate} (its queued work still completes). */
export function streamDestroy(device: number, stream: number): void {
  check(sym().mtc_stream_destroy(device, stream), () => `destroy a CUDA stream of cuda:${device}`);
}

/**
 * 0 when `stream` belongs to the primary context of `device`,
 * {@linkcode MTC_E_WRONG_DEVICE} when it belongs to another, else the
 * driver's status for it (never throws).
 */
export function streamCheck(device: number, stream: number): number {
  return sym().mtc_stream_check(device, stream);
}

/** 0 when `stream` is idle, -1 while it has work pending, else a CUDA status (never throws). */
export function streamStatus(device: number, stream: number): number {
  const status = sym().mtc_stream_query(device, stream);
  return status === CUDA_NOT_READY ? -1 : status;
}

/** Waits for `stream` on a Deno blocking-pool thread; 0 or a CUDA status. */
export function streamWaitIdleOffThread(device: number, stream: number): Promise<number> {
  return sym().mtc_stream_wait_idle_nonblocking(device, stream);
}

/** Two streams and a scratch event: the waiter waits for the signaler's work so far. */
export interface StreamFence {
  waiterDevice: number;
  waiter: number;
  signalDevice: number;
  signaler: number;
  /** An event of `signalDevice`, free again as soon as this returns. */
  event: number;
}

/** Makes `waiter` wait on the GPU for the work queued on `signaler` so far; returns at once. */
export function streamFence(
  { waiterDevice, waiter, signalDevice, signaler, event }: StreamFence,
): void {
  check(
    sym().mtc_stream_fence(waiterDevice, waiter, signalDevice, signaler, event),
    () => `order a stream of cuda:${waiterDevice} after a stream of cuda:${signalDevice}`,
  );
}

/** Makes `stream` of `device` wait on the GPU for the latest record of `event`; returns at once. */
export function streamWaitEvent(device: number, stream: number, event: number): void {
  check(
    sym().mtc_stream_wait_event(device, stream, event),
    () => `make a stream of cuda:${device} wait for an event`,
  );
}

/** Records `event` of `device` on `stream`. */
export function eventRecordOn(device: number, stream: number, event: number): void {
  check(
    sym().mtc_event_record_on(device, stream, event),
    () => `record a CUDA event on a stream of cuda:${device}`,
  );
}

/** How a module load ended: the module's handle, or a status and the JIT's log. */
export type ModuleLoad = { module: number } | { status: number; log: string };

/**
 * Loads a module (PTX text ending in a NUL byte, a cubin or a fat binary)
 * on `device`, on a Deno blocking-pool thread (the JIT may take a while).
 */
export async function moduleLoadOffThread(device: number, image: Uint8Array): Promise<ModuleLoad> {
  const handle = new Float64Array(1);
  const log = new Uint8Array(16 * 1024);
  const status = await sym().mtc_module_load_nonblocking(device, image, handle, log, log.length);
  if (status === 0) return { module: handle[0] };
  const end = log.indexOf(0);
  return { status, log: new TextDecoder().decode(log.subarray(0, end < 0 ? log.length : end)) };
}

/** Unloads a module from {@linkcode moduleLoadOffThread}. */
export function moduleUnload(device: number, module: number): void {
  check(sym().mtc_module_unload(device, module), () => `unload a module of cuda:${device}`);
}

/**
 * The kernel `name` of `module`; the status when the driver does not find
 * it (CUDA_ERROR_NOT_FOUND), as `{ status }`.
 */
export function moduleFunction(
  device: number,
  module: number,
  name: string,
): { function: number } | { status: number } {
  const status = sym().mtc_module_function(
    device,
    module,
    new TextEncoder().encode(name + "\0"),
    out,
  );
  return status === 0 ? { function: out[0] } : { status };
}

/** CUDA_ERROR_NOT_SUPPORTED: the driver cannot tell (e.g. parameter info before CUDA 12.4). */
export const CUDA_ERROR_NOT_SUPPORTED = 801;

/**
 * The parameters of a kernel as its image declares them (offset and size
 * each), at most `max` of them, or `undefined` where the driver cannot tell
 * (before CUDA 12.4).
 */
export function functionParams(
  device: number,
  fn: number,
  max: number,
): { offset: number; size: number }[] | undefined {
  const info = new Float64Array(1 + 2 * max);
  const status = sym().mtc_function_params(device, fn, info, max);
  if (status === CUDA_ERROR_NOT_SUPPORTED) return undefined;
  check(status, () => `read the parameters of a kernel of cuda:${device}`);
  return Array.from({ length: info[0] }, (_, i) => ({
    offset: info[1 + 2 * i],
    size: info[2 + 2 * i],
  }));
}

/** Bytes before a launch buffer's arguments: eight uint32 (grid, block, shared, argument bytes). */
export const LAUNCH_HEADER_BYTES = 32;

/**
 * Launches `fn` on `stream` of `device` with the configuration and
 * arguments in `config` (see {@linkcode LAUNCH_HEADER_BYTES}), then records
 * `event` (0: none). Returns 0 or the CUDA status (never throws: the
 * caller releases what it took first).
 */
export function launch(
  device: number,
  fn: number,
  stream: number,
  event: number,
  config: Uint8Array,
): number {
  return sym().mtc_launch(device, fn, stream, event, config);
}

// Process-wide caches (native/process_cache.c): idle pinned and device
// blocks, events and background stagers shared by every isolate of the
// process, and what each isolate holds, so that an isolate that ends
// without running JavaScript (a Worker) strands nothing.

/** The kind number of pinned host memory in the process-wide caches (a device's is its index). */
export const PINNED_KIND = -1;

/** Every kind at once, for {@linkcode cacheTrim}. */
export const ALL_KINDS = -2;

let isolate = 0;

/**
 * This isolate's id in the shim, registered on first use: when the
 * isolate's thread ends, what it still holds goes back to the caches.
 */
export function isolateId(): number {
  if (isolate === 0) {
    check(sym().mtc_isolate_attach(out), "register this isolate with the native shim");
    isolate = out[0];
  }
  return isolate;
}

/** Whether this isolate registered with the shim (it used pooled memory, events or stagers). */
export function isolateAttached(): boolean {
  return isolate !== 0;
}

/**
 * Ends this isolate in the shim (at `unload`): stops its background staging
 * (waiting at most `timeoutMs`), waits for the library streams, and caches
 * the blocks and events it still holds. False when a staging call did not
 * stop in time (its device blocks then stay out of the cache).
 */
export function isolateEnd(timeoutMs: number): boolean {
  if (isolate === 0) return true;
  const status = sym().mtc_isolate_end(isolate, timeoutMs);
  isolate = 0;
  return status === 0;
}

/** A block registered in the process-wide cache. */
export interface CachedBlock {
  /** Its record in the shim. */
  readonly id: number;
  readonly address: number;
  readonly size: number;
  /** Per-block cache of its owner (JS views of pinned memory). */
  cache?: unknown;
}

/** An idle block of exactly `size` bytes of `kind` from the process-wide cache, or undefined. */
export function blockTake(kind: number, size: number): CachedBlock | undefined {
  const status = sym().mtc_block_take(kind, isolateId(), size, out);
  if (status !== 0) throw cudaError(status, `take a cached block of ${size} bytes`);
  return out[0] < 0 ? undefined : { id: out[0], address: out[1], size };
}

/** Registers a block of `kind` this isolate just allocated; returns it with its id. */
export function blockAdopt(kind: number, address: number, size: number): CachedBlock {
  check(
    sym().mtc_block_adopt(kind, isolateId(), address, size, out),
    () => `register a block of ${size} bytes`,
  );
  return { id: out[0], address, size };
}

/**
 * Gives a block back to the process-wide cache, or frees it when its kind's
 * cache would pass `maxCachedBytes`. No view of pinned memory may remain.
 */
export function blockGive(id: number, maxCachedBytes: number): void {
  check(sym().mtc_block_give(id, maxCachedBytes), "give a block back to the cache");
}

/** Frees a registered block now. No view of pinned memory may remain. */
export function blockFree(id: number): void {
  check(sym().mtc_block_free(id), "free a pooled block");
}

/** What a trim freed, and when the next idle item will be old enough (ms; Infinity: none). */
export interface Trimmed {
  freed: number;
  nextMs: number;
}

/**
 * Frees the cached blocks of `kind` ({@linkcode ALL_KINDS} for every kind)
 * idle for `olderThanMs` or more; device memory goes back to the OS.
 */
export function cacheTrim(kind: number, olderThanMs: number): Trimmed {
  const result = new Float64Array(2);
  check(sym().mtc_cache_trim(kind, olderThanMs, result), "free cached memory");
  return { freed: result[0], nextMs: result[1] < 0 ? Infinity : result[1] };
}

let counters: Float64Array | undefined;

/**
 * The process-wide cache's counters, read without a call (native
 * memory mapped once): [0] flush requests, [1] stagers, [2] their bytes,
 * [3] idle stagers' bytes, then per kind k (0 pinned, 1 + d device d)
 * [4 + 2k] cached bytes and [5 + 2k] bytes held by every isolate together.
 */
export function cacheCounters(): Float64Array {
  if (!counters) {
    const where = new Float64Array(2);
    check(sym().mtc_cache_counters(where), "read the cache's counters");
    counters = new Float64Array(hostArrayBuffer(where[0], where[1] * 8));
  }
  return counters;
}

/** Asks every isolate to free the idle blocks it keeps for itself, at its next pool call. */
export function requestCacheFlush(): void {
  sym().mtc_cache_request_flush();
}

/** An event of `device` from the process-wide cache, or new; with its id for {@linkcode eventGive}. */
export function eventTake(device: number): { event: number; id: number } {
  check(
    sym().mtc_event_take(device, isolateId(), out),
    () => `create a CUDA event on cuda:${device}`,
  );
  return { event: out[0], id: out[1] };
}

/** Gives an event back to the process-wide cache; its recorded work has completed. */
export function eventGive(id: number): void {
  check(sym().mtc_event_give(id), "give a CUDA event back");
}

/** A background stager of `device` (`slots` × `slotBytes` pinned), cached or new; its handle. */
export function stagerTake(device: number, slots: number, slotBytes: number): number {
  check(
    sym().mtc_stager_take(device, isolateId(), slots, slotBytes, out),
    () => `allocate ${slots} × ${slotBytes} bytes of pinned staging memory for cuda:${device}`,
  );
  return out[0];
}

/** Gives a stager back to the process-wide cache (its staging call returned). */
export function stagerGive(stager: number): void {
  check(sym().mtc_stager_give(stager), "give a stager back");
}

/** Frees the stagers idle for `olderThanMs` or more. */
export function stagersTrim(olderThanMs: number): Trimmed {
  const result = new Float64Array(2);
  check(sym().mtc_stagers_trim(olderThanMs, result), "free idle stagers");
  return { freed: result[0], nextMs: result[1] < 0 ? Infinity : result[1] };
}

/** What a launch of a kernel may ask for (`cuFuncGetAttribute`). */
export interface FunctionLimits {
  /** Threads per block. */
  maxThreadsPerBlock: number;
  /** Bytes of dynamic shared memory per block. */
  maxDynamicSharedBytes: number;
}

/** The launch limits of kernel `fn` of `device`, or `undefined` where the driver cannot tell. */
export function functionLimits(device: number, fn: number): FunctionLimits | undefined {
  const limits = new Float64Array(3);
  const status = sym().mtc_function_limits(device, fn, limits);
  if (status === CUDA_ERROR_NOT_SUPPORTED) return undefined;
  check(status, () => `read the launch limits of a kernel of cuda:${device}`);
  return { maxThreadsPerBlock: limits[0], maxDynamicSharedBytes: limits[1] };
}
