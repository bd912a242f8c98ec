/**
 * Host and device memory and the copies between them: typed, checked
 * wrappers over the shim (through ffi/shim_call.ts). The other wrappers
 * live by what they wrap: `cuda_error.ts`, `driver_status.ts`, `events.ts`,
 * `streams.ts`, `stagers.ts`, `kernel_modules.ts`, `process_cache.ts`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { pointerOf } from "./native.ts";
 * assert.equal(pointerOf(0), null);
 * ```
 *
 * @module
 */

import { getHostView } from "./library.ts";
import { check, cudaError, out, sym } from "./shim_call.ts";

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
  // The engine's size of the view, not its `byteLength` property, which a
  // subclass or an own property may set to anything (the copy then read
  // past the buffer).
  const bytes = byteLengthOf.call(src) as number;
  check(
    sym().mtc_copy_from_buffer(device, dst, src, 0, bytes),
    () => `copy ${bytes} bytes from host to cuda:${device}`,
  );
}

const byteLengthOf = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Int8Array.prototype),
  "byteLength",
)!.get!;

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

/**
 * An ArrayBuffer over native memory the shim owns (no copy, no deleter): it
 * must not be used after that memory is freed; detach it first.
 */
export function hostArrayBuffer(address: number, bytes: number): ArrayBuffer {
  const pointer = Deno.UnsafePointer.create(BigInt(address));
  if (pointer === null) throw new TypeError("Cannot view a null address");
  return Deno.UnsafePointerView.getArrayBuffer(pointer, bytes);
}

/**
 * An ArrayBuffer over pinned memory that users may reach (pool blocks, host
 * arenas): counted by the shim until its last buffer is gone, so that
 * `hostFree` of memory whose buffer a user moved (`transfer()`,
 * `postMessage`) waits for that buffer instead of freeing under it. Where
 * the runtime has no Node-API, an uncounted buffer as `hostArrayBuffer`.
 */
export function pinnedArrayBuffer(address: number, bytes: number): ArrayBuffer {
  const hostView = getHostView();
  return hostView ? hostView(address, bytes) : hostArrayBuffer(address, bytes);
}

/**
 * Keeps `bytes` of pinned memory at `address` from ever being freed or
 * reused: for a buffer over it that a user moved where the runtime gave no
 * Node-API (the shim cannot see when that buffer dies). A leak, counted in
 * {@linkcode hostParked} once the library lets go of the memory.
 */
export function hostKeep(address: number, bytes: number): void {
  check(sym().mtc_host_keep(address, bytes), "keep pinned memory a moved buffer reaches");
}

/**
 * Hands pinned memory that {@linkcode pinnedArrayBuffer} made a counted
 * buffer over to its buffers: the shim frees it once the last one dies
 * (collected, `transfer(0)`, or its isolate torn down). `moved`: a buffer
 * the user moved is what still reaches it (counted by
 * {@linkcode hostParked}). Where no buffer remains, nothing happens: such
 * memory was freed already, or is queued to be.
 */
export function hostFreeAfterViews(address: number, moved: boolean): void {
  check(sym().mtc_host_free_after_views(address, moved ? 1 : 0), "hand pinned memory to its views");
}

/** Which view ledger the loaded shim keeps (compared with its Node-API module's). */
export function hostLedger(): number {
  return sym().mtc_host_ledger();
}

/**
 * Whether {@linkcode pinnedArrayBuffer} makes counted buffers here (the
 * runtime gives Node-API): where not, a buffer a user moved must be kept
 * with {@linkcode hostKeep}.
 */
export function pinnedBuffersCounted(): boolean {
  return getHostView() !== undefined;
}

/** Pinned memory parked behind views users moved, not freed yet: how many blocks, their bytes. */
export function hostParked(): { count: number; bytes: number } {
  check(sym().mtc_host_parked(out), "read the parked pinned memory");
  return { count: out[0], bytes: out[1] };
}

/** A PointerValue for an address (null for 0), for `Tensor.ptr`. */
export function pointerOf(address: number): Deno.PointerValue {
  return address === 0 ? null : Deno.UnsafePointer.create(BigInt(address));
}

/** A PointerValue to a view's first byte (null when empty); keeps the view alive. */
export function pointerOfView(view: ArrayBufferView): Deno.PointerValue {
  return view.byteLength === 0 ? null : Deno.UnsafePointer.of(view);
}
