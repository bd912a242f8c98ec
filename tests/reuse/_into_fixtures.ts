/**
 * A stand-in result and data for the structure checks of `into`: CPU
 * tensors play the outputs (the structure code never reads their device).
 */

import { Tensor } from "../../mod.ts";
import type { MatchColumns } from "../../src/reuse/into_match.ts";

/** Empty columns to fill. */
export function columns(): MatchColumns {
  return { sources: [], passContainers: [], passKeys: [], passValues: [] };
}

/** A result with arrays, a plain object, a Map and a null-prototype object, and its tensors in order. */
/** A stand-in result and its tensors in the walk's order. */
export interface ResultLike {
  result: {
    boxes: Tensor[];
    ids: Tensor;
    name: string;
    meta: Map<unknown, unknown>;
    none: { x: Tensor };
  };
  outputs: Tensor[];
}

/** A result with arrays, a plain object, a Map and a null-prototype object, and its tensors in order. */
export function resultLike(): ResultLike {
  const result = {
    boxes: [Tensor.from(new Float32Array(8), [2, 4]), Tensor.from(new Float32Array(4), [1, 4])],
    ids: Tensor.from(new BigInt64Array(2)),
    name: "a",
    meta: new Map<unknown, unknown>([["k", Tensor.from(new Uint8Array(3))], [7, null]]),
    none: Object.assign(Object.create(null), { x: Tensor.from(new Int32Array(1)) }),
  };
  const outputs = [
    result.boxes[0],
    result.boxes[1],
    result.ids,
    result.meta.get("k") as Tensor,
    result.none.x as Tensor,
  ];
  return { result, outputs };
}

/** Data that fits {@linkcode resultLike}'s result. */
export function data(): {
  boxes: Float32Array[];
  ids: BigInt64Array;
  name: string;
  meta: Map<unknown, unknown>;
  none: { x: Int32Array };
} {
  return {
    boxes: [new Float32Array(8), new Float32Array(4)],
    ids: new BigInt64Array(2),
    name: "b",
    meta: new Map<unknown, unknown>([["k", new Uint8Array(3)], [7, "seven"]]),
    none: Object.assign(Object.create(null), { x: new Int32Array(1) }),
  };
}

/** A leaf check that accepts every leaf. */
export const anyLeaf = (): void => {};
