/**
 * What a walk hands its leaves to: the sink's `add` makes what stands in
 * each leaf's place in the output.
 *
 * @module
 */

import type { TypedArray } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";

/** A tensor leaf of the input. */
export type Leaf = TypedArray | Tensor;

/** Receives the leaves of a walk; what `add` returns takes the leaf's place. */
export interface LeafSink {
  /**
   * Called for each tensor leaf, in walk order, with the leaf's host bytes
   * where the walk read them (a TypedArray leaf itself, the array a CPU
   * `Tensor` wraps; undefined for tensors in pooled memory) and, for a
   * TypedArray leaf, the code of its class (array_code.ts) that the walk's
   * check read (`NO_CODE` for a `Tensor`), so that no sink reads
   * it again.
   */
  add(leaf: Leaf, data: TypedArray | undefined, code: number): unknown;
  /** Called once after the last leaf of a walk that completed. */
  end?(): void;
  /**
   * Offered each leaf first by a compiled plan (not by the generic walk):
   * what it returns takes the leaf's place, unless it is
   * {@linkcode NOT_TAKEN}, and then the leaf goes to `add`.
   */
  readonly packedWalk?: LeafTaker;
}

/** What a {@linkcode LeafTaker} returns for a leaf it does not take. */
export const NOT_TAKEN: unique symbol = Symbol("not taken");

/**
 * What takers learned about one structure, kept with its compiled plan
 * (each kind of taker under its own key).
 */
export type TakerState = Record<string, unknown>;

/** Takes leaves before a sink's `add` (see {@linkcode LeafSink.packedWalk}). */
export interface LeafTaker {
  /**
   * A compiled plan is about to offer leaves; `state` is the plan's (see
   * {@linkcode TakerState}). False: the taker takes none in this walk
   * (it turned itself off) and the plan offers none.
   */
  begin(state: TakerState): boolean;
  /** A TypedArray leaf of class `code`. */
  array(leaf: TypedArray, code: number): unknown;
  /** A `Tensor` leaf. */
  tensor(leaf: Tensor): unknown;
}
