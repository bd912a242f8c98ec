/**
 * Checked wrappers over the test aids of the test-aid build
 * (`native/build/libmtc_testaid.so`: the product shim plus
 * `native/testaid.c`). Tests and benchmarks only; the product shim does not
 * export these. `deno task test` loads that build through `MTC_SHIM_PATH`;
 * elsewhere {@linkcode testAids} is `undefined` and tests that need it are
 * ignored.
 *
 * @module
 */

import { openTestAids } from "./library.ts";
import { cudaError } from "./shim_call.ts";

const library = openTestAids();

function check(status: number, op: string): void {
  if (status !== 0) throw cudaError(status, op);
}

/** Process-wide counters of the shim's CUDA calls since the process started. */
export interface ShimCounters {
  /** `cuMemHostAlloc` calls. */
  hostAllocs: number;
  /** `cuMemAllocAsync` calls. */
  deviceAllocs: number;
  /** Transfers queued (host↔device, device↔device, peer). */
  copies: number;
  /** Gather kernels launched. */
  kernels: number;
}

/** The shim's call sites where a fault can be injected (native/shim.h). */
export type FaultSite =
  | "host-alloc"
  | "device-alloc"
  | "copy"
  | "kernel"
  | "event-record"
  | "event-query"
  | "event-wait"
  | "peer-copy";

/** The test aids, or `undefined` where the loaded shim is the product build. */
export const testAids = library && {
  /** Reads the shim's counters (allocations are what the pools must avoid). */
  counters(): ShimCounters {
    const values = new Float64Array(4);
    library.symbols.mtc_counters(values);
    return {
      hostAllocs: values[0],
      deviceAllocs: values[1],
      copies: values[2],
      kernels: values[3],
    };
  },

  /**
   * Keeps the library stream of `device` busy for `microseconds` (a kernel
   * that waits on the GPU clock), so that work queued after it is certainly
   * in flight for that long.
   */
  delayStream(device: number, microseconds: number): void {
    check(
      library.symbols.mtc_delay_stream(device, microseconds),
      `delay the stream of cuda:${device}`,
    );
  },

  /**
   * Keeps `stream` (a CUDA stream of any owner) busy for `microseconds`, so
   * that what is queued after it there runs late for certain.
   */
  delayOn(stream: { device: string; handle: bigint }, microseconds: number): void {
    const device = Number(stream.device.slice("cuda:".length));
    check(
      library.symbols.mtc_delay_on(device, Number(stream.handle), microseconds),
      `delay a stream of ${stream.device}`,
    );
  },

  /**
   * Queues a device-to-device copy of `bytes` from address `src` to `dst` on
   * `stream`: a stand-in for a user's own FFI code reading a tensor's `ptr`.
   */
  copyOn(
    stream: { device: string; handle: bigint },
    { dst, src, bytes }: { dst: number; src: number; bytes: number },
  ): void {
    const device = Number(stream.device.slice("cuda:".length));
    check(
      library.symbols.mtc_copy_on(device, Number(stream.handle), dst, src, bytes),
      `copy ${bytes} bytes on a stream of ${stream.device}`,
    );
  },

  /** Copies device bytes into a JS buffer, synchronously and stream-ordered. */
  copyToBuffer({ device, dst, src }: { device: number; dst: ArrayBufferView; src: number }): void {
    check(
      library.symbols.mtc_copy_to_buffer(device, dst, 0, src, dst.byteLength),
      `copy ${dst.byteLength} bytes from cuda:${device} to host`,
    );
  },

  /**
   * Launches a kernel that writes to an unmapped address of `device`: from
   * then on the device's context is broken (CUDA_ERROR_ILLEGAL_ADDRESS on
   * every call). Only for a test in a process of its own.
   */
  triggerIllegalAddress(device: number): void {
    check(
      library.symbols.mtc_trigger_illegal_address(device),
      `launch the illegal-address kernel on cuda:${device}`,
    );
  },

  /**
   * How many live buffers made by the shim's Node-API `hostView` reach
   * `address` (the ledger that keeps moved pinned memory from being freed;
   * no driver needed).
   */
  hostViews(address: number): number {
    return library.symbols.mtc_host_views(address);
  },

  /** Free and total device memory of `device`, in bytes. */
  memInfo(device: number): { free: number; total: number } {
    const out = new Float64Array(2);
    check(library.symbols.mtc_mem_info(device, out), `read memory info of cuda:${device}`);
    return { free: out[0], total: out[1] };
  },

  /**
   * Adds the `count` float32 values at device address `src` into the float32
   * at device address `dst` (a kernel on the library stream of `device`,
   * ordered after the copies queued there): device code that consumes a
   * copied batch. Addresses, not tensors: ffi/ does not import src/ (a
   * tensor's address is `ptrAddress` of tests/gpu/_helpers.ts).
   */
  sumF32(
    { device, src, count, dst }: { device: number; src: number; count: number; dst: number },
  ): void {
    check(
      library.symbols.mtc_sum_f32(device, src, count, dst),
      `sum ${count} floats on cuda:${device}`,
    );
  },

  /**
   * Makes the next call at `site` (after `skip` more calls there) fail with
   * the CUDA error `error` instead of reaching the driver, once; `"off"`
   * disarms. Sites: allocations, copies (every host/device transfer), the
   * gather kernel, event records, event queries, event waits, peer copies.
   */
  injectFault(
    site: FaultSite | "off",
    { skip = 0, error = 2 }: { skip?: number; error?: number } = {},
  ): void {
    const sites: FaultSite[] = [
      "host-alloc",
      "device-alloc",
      "copy",
      "kernel",
      "event-record",
      "event-query",
      "event-wait",
      "peer-copy",
    ];
    check(
      library.symbols.mtc_inject_fault(site === "off" ? -1 : sites.indexOf(site), skip, error),
      `arm a fault at ${site}`,
    );
  },

  /**
   * Makes gathers take the copy-engine path (`true`), as they do where the
   * driver cannot load the device code, or the kernel again (`false`).
   */
  disableKernels(disabled: boolean): void {
    library.symbols.mtc_disable_kernels(disabled ? 1 : 0);
  },
};
