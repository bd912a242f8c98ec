// Type-level tests of CopyResult<T>: `deno check` (and `deno test`, which
// checks first) fails when an assignment below that must compile does not,
// or when one marked @ts-expect-error does.

import assert from "node:assert/strict";
import { type CopyResult, startCopy, Tensor } from "../mod.ts";

interface Camera {
  intrinsics: Float64Array;
}

interface Sample {
  boxes: Float32Array;
  ids: BigInt64Array;
  name: string;
  cameras: readonly Camera[];
  taken: Date;
  byName: Map<string, Uint8Array>;
  pair: readonly [Float32Array, number];
  optional?: Int32Array;
  maybe: Float16Array | null;
  tensor: Tensor;
}

class Opaque {
  data = new Float32Array(1);
  size(): number {
    return this.data.length;
  }
}

type Result = CopyResult<Sample & { opaque: Opaque }>;

Deno.test("CopyResult maps interfaces, tuples, readonly arrays and Maps; class instances pass through", async () => {
  const sample: Sample & { opaque: Opaque } = {
    boxes: new Float32Array(4),
    ids: new BigInt64Array(2),
    name: "s",
    cameras: [{ intrinsics: new Float64Array(9) }],
    taken: new Date(0),
    byName: new Map([["a", new Uint8Array(3)]]),
    pair: [new Float32Array(2), 7],
    maybe: null,
    tensor: Tensor.from(new Int8Array(1)),
    opaque: new Opaque(),
  };
  const r: Result = await startCopy(sample, "cpu").get();

  const boxes: Tensor = r.boxes;
  const intrinsics: Tensor = r.cameras[0].intrinsics;
  const name: string = r.name;
  const taken: Date = r.taken;
  const byName: Map<string, Tensor> = r.byName;
  const first: Tensor = r.pair[0];
  const second: number = r.pair[1];
  const optional: Tensor | undefined = r.optional;
  const maybe: Tensor | null = r.maybe;
  const tensor: Tensor = r.tensor;
  const opaque: Opaque = r.opaque;
  const raw: Float32Array = r.opaque.data;
  // The run time agrees with the types.
  assert.ok(boxes instanceof Tensor && intrinsics instanceof Tensor && first instanceof Tensor);
  assert.ok(byName.get("a") instanceof Tensor && tensor instanceof Tensor);
  assert.equal(name, "s");
  assert.equal(taken, sample.taken);
  assert.equal(second, 7);
  assert.equal(optional, undefined);
  assert.equal(maybe, null);
  assert.equal(opaque, sample.opaque);
  assert.equal(raw, sample.opaque.data);

  // @ts-expect-error a copied leaf is a Tensor, not the TypedArray it came from
  const _leafStaysArray: Float32Array = r.boxes;
  // @ts-expect-error strings pass through
  const _stringBecomesTensor: Tensor = r.name;
  // @ts-expect-error class instances pass through unchanged: their arrays are not copied
  const _classFieldCopied: Tensor = r.opaque.data;
  // @ts-expect-error a tuple keeps its element types
  const _tupleWidened: Tensor = r.pair[1];
  // @ts-expect-error Map values are copied too
  const _mapValueStaysArray: Map<string, Uint8Array> = r.byName;
});
