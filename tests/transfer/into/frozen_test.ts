import { freezeContainers } from "../../../examples/freeze_containers.ts";
import assert from "node:assert/strict";
import { Tensor } from "../../../mod.ts";
import { buildShape, type IntoShape } from "../../../src/reuse/into_shape.ts";
import { frozenAlong, frozenCounts } from "../../../src/transfer/into/frozen.ts";
import { readCounts, readData } from "../../../src/transfer/into/leaves.ts";
import { buildRecord, type IntoRecord } from "../../../src/transfer/into/record.ts";
import { CUDA0, fittingData, madeResult } from "./_result.ts";

// A frozen structure is read once: a copy of the same deep-frozen data root
// skips the data's structure check, and of a deep-frozen result the check
// that it still holds its tensors; everything that can still change (the
// leaves' bytes and state, Object.prototype) is checked as before.

/** A result of nested containers: two made results, one in an array. */
function nestedResult() {
  const first = madeResult().result;
  const second = madeResult().result;
  return { first, rest: [second], tag: 1 };
}

function nestedData() {
  return { first: fittingData(), rest: [fittingData()], tag: 2 };
}

Deno.test("frozenAlong: every array and plain object frozen, with data properties only", () => {
  const shape = buildShape(nestedResult()) as IntoShape;
  assert.equal(frozenAlong(shape.root, freezeContainers(nestedData())), true);
  assert.equal(frozenAlong(shape.root, nestedData()), false);
  // One container not frozen, deep inside.
  const inner = nestedData();
  Object.freeze(inner);
  Object.freeze(inner.rest);
  freezeContainers(inner.first);
  assert.equal(frozenAlong(shape.root, inner), false);
  // A getter, frozen or not, runs code at every read.
  const getter = nestedData();
  const first = getter.first;
  Object.defineProperty(getter, "first", { get: () => first, enumerable: true });
  assert.equal(frozenAlong(shape.root, freezeContainers(getter)), false);
  // An array's element a getter.
  const element = nestedData();
  const second = element.rest[0];
  Object.defineProperty(element.rest, 0, { get: () => second, enumerable: true });
  assert.equal(frozenAlong(shape.root, freezeContainers(element)), false);
  // A Map's entries can always change.
  const withMap = buildShape({
    m: new Map([["k", Tensor.from(new Float32Array(1))]]),
  }) as IntoShape;
  const map = Object.freeze({ m: new Map([["k", new Float32Array(1)]]) });
  assert.equal(frozenAlong(withMap.root, map), false);
});

Deno.test("readData: a frozen root met again skips its structure check, its leaves still checked", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const data = freezeContainers(fittingData());
  readData(record, data, result);
  readData(record, data, result); // met twice in a row: checked deep-frozen
  const before = { ...frozenCounts };
  const same = readCounts.same;
  assert.equal(readData(record, data, result), 1);
  assert.deepEqual(frozenCounts, { ...before, structure: before.structure + 1 });
  assert.equal(readCounts.same, same + 1);
  assert.equal(record.views[2], data.big);
  // The result's tensors are still read (it is not frozen): one replaced is found.
  const kept = result.ids;
  result.ids = madeResult().result.ids; // of the same layout, elsewhere
  assert.throws(() => readData(record, data, result), /ids/);
  result.ids = kept;
  assert.equal(readData(record, data, result), 1);
  // A leaf disposed since is found, and named.
  data.boxes.dispose();
  assert.throws(() => readData(record, data, result), /disposed tensor at \$\.boxes/);
});

Deno.test("readData: a frozen result skips its check too, once that check passed", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  // No value passed through: a frozen result refuses the write of one.
  const data = freezeContainers({ ...fittingData(), name: "a" });
  for (let i = 0; i < 3; i++) readData(record, data, result);
  Object.freeze(result);
  readData(record, data, result); // checked deep-frozen, then its tensors read
  const before = { ...frozenCounts };
  readData(record, data, result);
  readData(record, data, result);
  assert.deepEqual(frozenCounts, { structure: before.structure + 2, result: before.result + 2 });
});

Deno.test("readData: an enumerable key on Object.prototype sends a frozen root through the full check", () => {
  const { result } = madeResult();
  const record = buildRecord(result, CUDA0);
  const data = freezeContainers(fittingData());
  for (let i = 0; i < 3; i++) readData(record, data, result);
  const before = { ...frozenCounts };
  (Object.prototype as Record<string, unknown>).zz = 1;
  try {
    // (The compiled check refuses it; the generic one decides.)
    readData(record, data, result);
  } finally {
    delete (Object.prototype as Record<string, unknown>).zz;
  }
  assert.deepEqual(frozenCounts, before);
});

// The differential test of the frozen path: one record kept across rounds
// against a record made afresh each round, on the same data and result,
// changed between rounds in the ways a user can change them.
Deno.test("readData: a kept record reads frozen and changing structures as a fresh one does", () => {
  let seed = 20261125;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const pick = <T>(items: T[]): T => items[Math.floor(rand() * items.length)];
  const result = nestedResult();
  const kept = buildRecord(result, CUDA0);
  let round = 0;
  // A root of either kind, its leaves shared with the last one or new.
  const leaves = () => pick([() => fittingData(), () => ({ ...fittingData(), name: "a" })])();
  let data: ReturnType<typeof nestedData> = nestedData();
  const frozenCopy = (from: ReturnType<typeof nestedData>) =>
    freezeContainers({ first: { ...from.first }, rest: [{ ...from.rest[0] }], tag: from.tag });
  const identities = new WeakMap<object, number>();
  let next = 0;
  const id = (value: unknown) => {
    if (typeof value !== "object" || value === null) return value;
    if (!identities.has(value)) identities.set(value, next++);
    return identities.get(value);
  };
  const outcome = (record: IntoRecord) => {
    try {
      const passes = readData(record, data, result);
      const { passContainers, passKeys, passValues } = record.columns;
      return {
        passes,
        views: record.views.map(id),
        codes: [...record.codes],
        state: [...record.groupState],
        passed: passContainers.slice(0, passes).map((container, m) => [
          id(container),
          passKeys[m],
          passValues[m],
        ]),
      };
    } catch (error) {
      return { error: `${(error as Error).constructor.name}: ${(error as Error).message}` };
    }
  };
  const roots = [data];
  const start = { ...frozenCounts };
  for (; round < 4000; round++) {
    // Made before the round's changes, as a result's record is made at its
    // first copy and kept: one of its tensors replaced since is refused.
    const fresh = buildRecord(result, CUDA0);
    const change = rand();
    let undo = () => {};
    if (change < 0.4) {
      // Unchanged: the same root again.
    } else if (change < 0.55) {
      data = frozenCopy(pick([data, nestedData()]));
    } else if (change < 0.62) {
      data = { first: { ...data.first }, rest: [{ ...data.rest[0] }], tag: data.tag };
    } else if (change < 0.68) {
      // A leaf changed in place (refused where the root is frozen).
      const at = pick([data.first, data.rest[0]]) as Record<string, unknown>;
      try {
        at[pick(["boxes", "ids", "big", "name"])] = pick([leaves().big, 7, new Uint8Array(3)]);
      } catch {
        // Frozen.
      }
    } else if (change < 0.72) {
      // A frozen root with one container not frozen, changed later.
      const inner = { ...leaves() };
      const rest = [freezeContainers(leaves())];
      data = Object.freeze({ first: inner, rest: Object.freeze(rest) as typeof rest, tag: 2 });
    } else if (change < 0.76) {
      // A frozen root whose value is read through a getter.
      const copy = { first: { ...data.first }, rest: [{ ...data.rest[0] }], tag: 0 };
      Object.defineProperty(copy, "tag", { get: () => round % 3, enumerable: true });
      data = freezeContainers(copy);
    } else if (change < 0.8) {
      // A leaf's bytes gone: a tensor disposed, or a buffer detached.
      const at = pick([data.first, data.rest[0]]);
      try {
        if (rand() < 0.5) at.boxes.dispose();
        else structuredClone(at.ids.buffer, { transfer: [at.ids.buffer as ArrayBuffer] });
      } catch {
        // Not a tensor or a view there now, or detached already.
      }
    } else if (change < 0.85) {
      // The result changed under its structure, for this round.
      const at = pick([result.first, result.rest[0]]);
      const tensor = at.ids;
      at.ids = madeResult().result.ids;
      undo = () => at.ids = tensor;
    } else if (change < 0.9) {
      (Object.prototype as Record<string, unknown>).zz = 1;
      undo = () => delete (Object.prototype as Record<string, unknown>).zz;
    } else if (change < 0.93) {
      // The result's value passed through changed.
      const tag = result.tag;
      result.tag = 9;
      undo = () => result.tag = tag;
    } else {
      // Back to an earlier root, after others filled the columns.
      data = pick(roots);
    }
    if (roots[roots.length - 1] !== data) roots.push(data);
    if (roots.length > 4) roots.shift();
    try {
      assert.deepEqual(outcome(kept), outcome(fresh), `round ${round}`);
    } finally {
      undo();
    }
  }
  // The frozen path ran, many times.
  assert.ok(
    frozenCounts.structure - start.structure > 300,
    `${frozenCounts.structure - start.structure}`,
  );
});
