/**
 * A result of a copy to cuda:0 made on the CPU: tensors bound to storages
 * over made-up addresses (the into steps read addresses and holds, never
 * the memory), so the record, the data check and the holds check run
 * without a GPU.
 */

import { TensorLayout } from "../../../src/tensor_layout.ts";
import { BlockPool } from "../../../src/memory/block_pool.ts";
import { Storage } from "../../../src/memory/storage.ts";
import { Tensor, tensorInternals } from "../../../src/tensor.ts";
import { vectorShape } from "../../../src/vector_shape.ts";

/** The device index of the made-up results. */
export const CUDA0 = 0;

/** A pool over made-up addresses. */
export function addressPool(): BlockPool {
  let next = 1 << 20;
  return new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free() {} });
}

/** A made-up result and the two storages it lies in. */
export interface MadeResult {
  result: { boxes: Tensor; ids: Tensor; big: Tensor; name: string };
  chunk: Storage;
  own: Storage;
}

/**
 * `{ boxes, ids, big, name }`: boxes (float32 [2, 4]) at 0 and ids (int64
 * [3]) at 64 in one chunk, big (uint8 [100]) in a block of its own.
 */
export function madeResult(): MadeResult {
  const pool = addressPool();
  const chunk = new Storage(pool, pool.acquire(256), 2);
  const own = new Storage(pool, pool.acquire(100), 1);
  const boxes = tensorInternals.createBound(
    new TensorLayout("float32", Object.freeze([2, 4]), 32, CUDA0),
    chunk,
    0,
  );
  const ids = tensorInternals.createBound(
    new TensorLayout("int64", vectorShape(3), 24, CUDA0),
    chunk,
    64,
  );
  const big = tensorInternals.createBound(
    new TensorLayout("uint8", vectorShape(100), 100, CUDA0),
    own,
    0,
  );
  return { result: { boxes, ids, big, name: "a" }, chunk, own };
}

/** Data that fits {@linkcode madeResult}'s result. */
export function fittingData(): {
  boxes: Tensor;
  ids: BigInt64Array;
  big: Uint8Array;
  name: string;
} {
  return {
    boxes: Tensor.from(new Float32Array(8), [2, 4]),
    ids: new BigInt64Array(3),
    big: new Uint8Array(100),
    name: "b",
  };
}
