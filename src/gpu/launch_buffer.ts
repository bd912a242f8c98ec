/**
 * `LaunchBuffer`: the one buffer a kernel launches from (`mtc_launch`),
 * reused by every launch of the kernel: eight uint32 of configuration
 * (grid x y z, block x y z, dynamic shared bytes, argument bytes), then the
 * arguments laid out as the kernel's parameters (each aligned to its size),
 * which the driver copies when the launch is queued.
 *
 * Its own file because writing an argument is where a value meets its
 * declared type (ranges, integers, tensors of the right device): the
 * checks run on any machine, the launch itself needs a GPU.
 *
 * @module
 */

import { LAUNCH_HEADER_BYTES } from "../../ffi/kernel_modules.ts";
import { type DeviceIndex, deviceName } from "../device.ts";
import type { Storage } from "../memory/storage.ts";
import { Tensor, tensorInternals } from "../tensor.ts";
import { describe } from "./arguments.ts";
import { argError, parameterOffsets, type ParamType, rangeError } from "./kernel_params.ts";

const TWO_32 = 2 ** 32;
const TWO_63 = 2n ** 63n;
const TWO_64 = 2n ** 64n;

/**
 * A kernel's launch buffer (library-internal: one per `Kernel`): the
 * header the launch writes its configuration into, and the arguments,
 * written and checked against the parameter types.
 *
 * @example Arguments land at their parameters' offsets, past the header
 * ```ts
 * import assert from "node:assert/strict";
 * import { LaunchBuffer } from "./launch_buffer.ts";
 * const buffer = new LaunchBuffer("k", 0, ["u32", "f64"]);
 * buffer.writeArgs([7, 0.5]);
 * assert.equal(buffer.u32[7], 16); // argument bytes: 4, padding, 8
 * assert.equal(new DataView(buffer.bytes.buffer).getUint32(32, true), 7);
 * ```
 */
export class LaunchBuffer {
  /** The launch buffer itself, header and arguments, as `mtc_launch` reads it. */
  readonly bytes: Uint8Array;
  /** The buffer as uint32: the header (the configuration) is its first eight. */
  readonly u32: Uint32Array;
  readonly #name: string;
  readonly #device: DeviceIndex;
  readonly #params: readonly ParamType[];
  readonly #offsets: Int32Array;
  readonly #i32: Int32Array;
  readonly #f32: Float32Array;
  readonly #f64: Float64Array;
  readonly #b64: BigUint64Array;

  /** A buffer for kernel `name` of `device`, whose parameters are `params`. */
  constructor(name: string, device: DeviceIndex, params: readonly ParamType[]) {
    this.#name = name;
    this.#device = device;
    this.#params = params;
    const offsets = parameterOffsets(params);
    // Offsets in the launch buffer, past its header.
    this.#offsets = offsets.offsets.map((offset) => offset + LAUNCH_HEADER_BYTES);
    // Whole 8-byte words, so that every typed view below fits it.
    const buffer = new ArrayBuffer(LAUNCH_HEADER_BYTES + Math.ceil(offsets.bytes / 8) * 8);
    this.bytes = new Uint8Array(buffer);
    this.u32 = new Uint32Array(buffer);
    this.#i32 = new Int32Array(buffer);
    this.#f32 = new Float32Array(buffer);
    this.#f64 = new Float64Array(buffer);
    this.#b64 = new BigUint64Array(buffer);
    this.u32[7] = offsets.bytes;
  }

  /**
   * Writes the arguments into the buffer; returns the storages to hold.
   *
   * @throws {TypeError} for no array, a wrong count, an argument of the
   * wrong type, a disposed or CPU tensor
   * @throws {RangeError} for a number out of its type's range, a tensor of
   * another device
   */
  writeArgs(args: unknown): Storage[] | undefined {
    const params = this.#params;
    if (!Array.isArray(args)) {
      throw new TypeError(`Invalid args: expected an array, got ${describe(args)}`);
    }
    if (args.length !== params.length) {
      throw new TypeError(
        `Invalid args: kernel "${this.#name}" takes ${params.length} argument${
          params.length === 1 ? "" : "s"
        } (${params.join(", ")}), got ${args.length}`,
      );
    }
    let holds: Storage[] | undefined;
    for (let i = 0; i < params.length; i++) {
      const arg = args[i];
      const type = params[i];
      const at = this.#offsets[i];
      if (arg instanceof Tensor) {
        if (type !== "ptr") throw argError(i, type, arg);
        if (arg.disposed) throw new TypeError(`Invalid args[${i}]: the tensor was disposed`);
        const device = tensorInternals.device(arg);
        if (device !== this.#device) {
          const error = `Invalid args[${i}]: expected a tensor on ${
            deviceName(this.#device)
          }, got one on ${arg.device}`;
          throw device < 0 ? new TypeError(error) : new RangeError(error);
        }
        const storage = tensorInternals.storage(arg);
        let address = 0;
        if (storage !== undefined) {
          address = tensorInternals.address(arg);
          (holds ??= []).push(storage);
        }
        this.u32[at >> 2] = address % TWO_32;
        this.u32[(at >> 2) + 1] = Math.floor(address / TWO_32);
      } else if (typeof arg === "bigint") {
        if (type === "f32" || type === "f64" || type === "i32" || type === "u32") {
          throw argError(i, type, arg);
        }
        const signed = type === "i64";
        if (signed ? arg < -TWO_63 || arg >= TWO_63 : arg < 0n || arg >= TWO_64) {
          throw new RangeError(`Invalid args[${i}]: ${arg} is out of range for ${type}`);
        }
        this.#b64[at >> 3] = BigInt.asUintN(64, arg);
      } else if (typeof arg === "number") {
        this.#writeNumber(i, type, at, arg);
      } else {
        throw argError(i, type, arg);
      }
    }
    return holds;
  }

  #writeNumber(i: number, type: ParamType, at: number, value: number): void {
    switch (type) {
      case "f32":
        this.#f32[at >> 2] = value;
        return;
      case "f64":
        this.#f64[at >> 3] = value;
        return;
      case "ptr":
        throw argError(i, type, value);
    }
    if (!Number.isInteger(value)) {
      throw new RangeError(`Invalid args[${i}]: expected an integer for ${type}, got ${value}`);
    }
    switch (type) {
      case "i32":
        if (value < -(2 ** 31) || value >= 2 ** 31) throw rangeError(i, type, value);
        this.#i32[at >> 2] = value;
        return;
      case "u32":
        if (value < 0 || value >= TWO_32) throw rangeError(i, type, value);
        this.u32[at >> 2] = value;
        return;
      default: {
        // i64 / u64 from a safe integer, written as two 32-bit halves.
        if (!Number.isSafeInteger(value) || (type === "u64" && value < 0)) {
          throw rangeError(i, type, value);
        }
        const low = ((value % TWO_32) + TWO_32) % TWO_32;
        this.u32[at >> 2] = low;
        this.u32[(at >> 2) + 1] = (value - low) / TWO_32;
      }
    }
  }
}
