/**
 * `CopyResult<T>`: the type `startCopy` gives its result, computed from the
 * type of its input (the types it rests on are exported with it, so that a
 * reader of the contract can follow them).
 *
 * Types only, apart from `startCopy` (`start_copy.ts`): they are the longest
 * part of its contract and change for reasons of their own (what a type can
 * tell of a class instance), while `startCopy` orchestrates the copy.
 *
 * @module
 */

import type { TypedArray } from "./dtype.ts";
import type { Tensor } from "./tensor.ts";

/**
 * Objects `startCopy` passes through by reference, whatever their contents
 * (for {@linkcode CopyResult}): built-in classes, functions and class
 * constructors.
 */
export type OpaqueObject =
  | Date
  | RegExp
  | ArrayBuffer
  | SharedArrayBuffer
  | DataView
  | Promise<unknown>
  | ReadonlySet<unknown>
  | WeakMap<object, unknown>
  | WeakSet<object>
  | WeakRef<object>
  | Error
  | ((...args: never[]) => unknown)
  | (abstract new (...args: never[]) => unknown);

/**
 * Whether `T` has methods: the type of a class instance, which `startCopy`
 * passes through (at run time only plain objects are walked; a type cannot
 * say which objects are plain, and data interfaces have no methods).
 */
export type HasMethods<T> = {
  [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never;
}[keyof T] extends never ? false : true;

/**
 * Whether `T` has members that only a class instance can have: `private`,
 * `protected` or `#private` ones (an object of `T`'s public members is then
 * not a `T`).
 */
export type HasNonPublicMembers<T> = { [K in keyof T]: T[K] } extends T ? false : true;

/**
 * Whether {@linkcode CopyResult} types an object type `T` as passed through
 * unchanged (a class instance, as far as a type can tell) rather than as a
 * plain object that is walked: an {@linkcode OpaqueObject}, a type with a
 * `[Symbol.toStringTag]` (built-in classes have one; give a class of your
 * own one to mark it), with methods ({@linkcode HasMethods}), or with
 * `private`, `protected` or `#private` members
 * ({@linkcode HasNonPublicMembers}).
 */
export type PassesThrough<T> = T extends OpaqueObject ? true
  : T extends { readonly [Symbol.toStringTag]: string } ? true
  : HasMethods<T> extends true ? true
  : HasNonPublicMembers<T>;

/**
 * The result type of copying a `T`: every TypedArray or Tensor leaf becomes
 * a `Tensor`; arrays, tuples, plain objects (types and interfaces) and Maps
 * keep their shape; other objects (class instances, `Date`, ...) and
 * primitives pass through as they are (see {@linkcode PassesThrough}).
 *
 * The limit of a type: at run time the walk tells a plain object from a
 * class instance by its prototype, which a type does not record. A class
 * whose members are all public data fields has the same type as an
 * interface with those fields, and is typed as walked (its TypedArrays as
 * `Tensor`s) although the copy passes it through. Give such a class a
 * method, a `#private` member or a `readonly [Symbol.toStringTag]` to have
 * it typed as it runs. The reverse holds for a plain object with
 * function-valued members: typed as passed through, walked at run time.
 *
 * @example Typing a batch with an interface
 * ```ts
 * import { type CopyResult, startCopy, type Tensor } from "@mtc/core";
 * import assert from "node:assert/strict";
 * interface Sample { boxes: Float32Array; name: string }
 * const batch: Sample[] = [{ boxes: new Float32Array(4), name: "a" }];
 * const copied: CopyResult<Sample[]> = await startCopy(batch, "cpu").get();
 * const boxes: Tensor = copied[0].boxes;
 * assert.equal(boxes.numel, 4);
 * assert.equal(copied[0].name, "a");
 * ```
 *
 * @example A class instance passes through, typed as itself
 * ```ts
 * import { startCopy } from "@mtc/core";
 * import assert from "node:assert/strict";
 * class Calibration {
 *   readonly [Symbol.toStringTag] = "Calibration";
 *   matrix = new Float64Array(9);
 * }
 * const calibration = new Calibration();
 * const copied = await startCopy({ calibration }, "cpu").get();
 * const matrix: Float64Array = copied.calibration.matrix; // not copied
 * assert.equal(matrix, calibration.matrix);
 * ```
 */
export type CopyResult<T> = T extends Tensor | TypedArray ? Tensor
  : T extends ReadonlyMap<infer K, infer V> ? Map<K, CopyResult<V>>
  : T extends readonly unknown[] ? { -readonly [I in keyof T]: CopyResult<T[I]> }
  : T extends object ? PassesThrough<T> extends true ? T
    : { [K in keyof T as K extends symbol ? never : K]: CopyResult<T[K]> }
  : T;
