/**
 * `loadModule`: device code from PTX, a cubin or a fat binary, with only the
 * NVIDIA driver (it JIT-compiles PTX for the GPU it runs on): no toolkit,
 * no build step.
 *
 * @module
 */

import {
  functionLimits,
  functionParams,
  moduleFunction,
  moduleLoadOffThread,
  moduleUnload,
} from "../../ffi/kernel_modules.ts";
import { cudaError } from "../../ffi/shim_call.ts";
import { type DeviceIndex, deviceName } from "../device.ts";
import { Kernel, type KernelOwner } from "./kernel.ts";
import { checkAgainstImage, checkParamTypes, MAX_PARAMS, type ParamType } from "./kernel_params.ts";
import { ModuleLoadError } from "./module_load_error.ts";
import { describe, parseCudaDevice } from "./arguments.ts";

/** Options of {@linkcode loadModule}. */
export interface LoadModuleOptions {
  /** The device to load it on: `"cuda"` or `"cuda:N"` (default `"cuda:0"`). */
  device?: string;
}

const CUDA_ERROR_NOT_FOUND = 500;

/**
 * Loads device code on a device: PTX text (a string, or its bytes), a
 * cubin, or a fat binary. The driver JIT-compiles PTX on a Deno
 * blocking-pool thread, so the event loop keeps running.
 *
 * @param image PTX text, or a cubin, fat binary or PTX as bytes
 * @param options `device` (default `"cuda:0"`)
 * @returns a Promise of the module; it rejects with a
 * {@linkcode ModuleLoadError} carrying the JIT's log when the driver refuses
 * the image (malformed PTX, a GPU it was not built for)
 * @throws {TypeError} at once, for an image that is neither a non-empty
 * string nor a non-empty `Uint8Array`, bad options, or a malformed device
 * @throws {RangeError} at once, for a device past the device count
 *
 * @example Load PTX and look a kernel up
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceCount, loadModule } from "@mtc/core";
 * const ptx = `.version 7.0
 * .target sm_75
 * .address_size 64
 * .visible .entry noop() { ret; }`;
 * if (deviceCount() > 0) {
 *   const module = await loadModule(ptx);
 *   const noop = module.kernel("noop", []);
 *   await noop.launch({ grid: 1, block: 1, args: [] }).done();
 *   module.dispose();
 *   assert.ok(module.disposed);
 * }
 * ```
 */
export function loadModule(
  image: string | Uint8Array,
  options?: LoadModuleOptions,
): Promise<CudaModule> {
  let bytes: Uint8Array;
  if (typeof image === "string" && image.length > 0) {
    bytes = new TextEncoder().encode(image + "\0");
  } else if (image instanceof Uint8Array && image.byteLength > 0) {
    // A copy with a NUL byte after it: PTX must end in one, and a binary
    // image does not mind it; the caller may reuse its buffer at once.
    bytes = new Uint8Array(image.byteLength + 1);
    bytes.set(image);
  } else {
    throw new TypeError(
      `Invalid image: expected PTX text or a non-empty Uint8Array (cubin, fat binary, PTX), got ${
        typeof image === "string" ? "an empty string" : describe(image)
      }`,
    );
  }
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    throw new TypeError(`Invalid options: expected an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options ?? {})) {
    if (key !== "device") throw new TypeError(`Invalid option "${key}": expected device`);
  }
  // Own property only: an enumerable device on Object.prototype is no option.
  const named = options !== undefined && Object.hasOwn(options, "device")
    ? options.device
    : undefined;
  const device = parseCudaDevice(named ?? "cuda:0", "device");
  return moduleLoadOffThread(device, bytes).then((loaded) => {
    if ("module" in loaded) {
      constructing = true;
      try {
        return new CudaModule(device, loaded.module);
      } finally {
        constructing = false;
      }
    }
    const op = `load a module on ${deviceName(device)}`;
    throw new ModuleLoadError(cudaError(loaded.status, op), loaded.log.trim());
  });
}

// Set only while loadModule constructs a CudaModule.
let constructing = false;

/**
 * Device code loaded on one device by {@linkcode loadModule}: look its
 * kernels up with {@linkcode CudaModule.kernel}. `dispose()` unloads it once
 * its launches in flight are done.
 *
 * @example See {@linkcode loadModule}
 * ```ts
 * import assert from "node:assert/strict";
 * import { CudaModule } from "@mtc/core";
 * assert.equal(typeof CudaModule, "function");
 * ```
 */
export class CudaModule {
  readonly #device: DeviceIndex;
  readonly #address: number;
  #disposed = false;
  #launches = 0;
  readonly #owner: KernelOwner;
  /** Kernels looked up so far, by name: the driver is asked once per name. */
  readonly #functions = new Map<string, number>();

  /**
   * Library-internal: made by {@linkcode loadModule} (`new CudaModule()`
   * throws a `TypeError`).
   */
  constructor(device: DeviceIndex, address: number) {
    if (!constructing) {
      throw new TypeError("Cannot construct a CudaModule directly: use loadModule()");
    }
    this.#device = device;
    this.#address = address;
    this.#owner = {
      assertLive: (what) => {
        if (this.#disposed) throw new TypeError(`Cannot ${what}: its module was disposed`);
      },
      begin: () => void this.#launches++,
      end: () => {
        if (--this.#launches !== 0 || !this.#disposed) return;
        try {
          this.#unload();
        } catch {
          // A broken context (an earlier fault) unloads nothing; the work's
          // own failure already says why.
        }
      },
    };
  }

  /** `"cuda:N"`, the device it is loaded on. */
  get device(): string {
    return deviceName(this.#device);
  }

  /** Whether {@linkcode CudaModule.dispose} was called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * The kernel `name` with the parameter types `params`. Where the driver
   * can tell (CUDA 12.4 and later) the count and sizes of the parameters are
   * checked against the kernel's image.
   *
   * @param name the kernel's name in the image (`extern "C"` names are plain)
   * @param params one type per parameter, in order
   * @returns the kernel, ready to launch
   * @throws {TypeError} for a name that is no string or not in the module, a
   * parameter list that is no array of parameter types or does not match the
   * image, or a disposed module
   */
  kernel(name: string, params: readonly ParamType[]): Kernel {
    if (typeof name !== "string" || name.length === 0) {
      throw new TypeError(`Invalid name: expected a kernel name, got ${describe(name)}`);
    }
    this.#owner.assertLive(`look up kernel "${name}"`);
    checkParamTypes(params);
    let fn = this.#functions.get(name);
    if (fn === undefined) {
      fn = this.#lookUp(name);
      this.#functions.set(name, fn);
    }
    // One parameter more than declared is asked for: that the driver has
    // none there is what says the kernel takes no more (a kernel that takes
    // more is asked again, for its count).
    let image = functionParams(this.#device, fn, params.length + 1);
    if (image && image.length > params.length) {
      image = functionParams(this.#device, fn, MAX_PARAMS);
    }
    checkAgainstImage(name, params, image);
    const limits = functionLimits(this.#device, fn);
    return new Kernel(this.#owner, this.#device, fn, name, params, limits);
  }

  /** The driver's handle of kernel `name`. */
  #lookUp(name: string): number {
    const found = moduleFunction(this.#device, this.#address, name);
    if ("status" in found) {
      if (found.status === CUDA_ERROR_NOT_FOUND) {
        throw new TypeError(
          `Invalid name "${name}": the module has no kernel of that name (CUDA_ERROR_NOT_FOUND; C++ names are mangled unless declared extern "C")`,
        );
      }
      throw cudaError(found.status, `look up kernel "${name}" on ${this.device}`);
    }
    return found.function;
  }

  /**
   * Unloads the module once its launches in flight are done; its kernels
   * cannot be launched from now on. Calling it again does nothing.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    if (this.#launches === 0) this.#unload();
  }

  /** Same as {@linkcode CudaModule.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Shows the device and state in `console.log`. */
  [Symbol.for("Deno.customInspect")](): string {
    return `CudaModule(${this.device}${this.#disposed ? ", disposed" : ""})`;
  }

  #unload(): void {
    moduleUnload(this.#device, this.#address);
  }
}
