import { freezeContainers } from "../../../examples/freeze_containers.ts";
import assert from "node:assert/strict";
import { Tensor } from "../../../mod.ts";
import { buildShape, type IntoShape } from "../../../src/reuse/into_shape.ts";
import {
  frozenAlong,
  frozenCounts,
  whenFrozenPathReady,
} from "../../../src/transfer/into/frozen.ts";
import { readCounts, readData } from "../../../src/transfer/into/leaves.ts";
import { buildRecord, type IntoRecord } from "../../../src/transfer/into/record.ts";
import { CUDA0, fittingData, madeResult } from "./_result.ts";

// A frozen structure is read once: a copy of the same deep-frozen data root
// skips the data's structure check, and of a deep-frozen result the check
// that it still holds its tensors; everything that can still change (the
// leaves' bytes and state, the values passed through, Object.prototype) is
// checked as before, and proxies are never taken for frozen.

// (The frozen path tells proxies once node:util is loaded: until then it is not taken.)
await whenFrozenPathReady();

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
  // A proxy, even over a frozen target: its traps still run.
  const frozen = freezeContainers(nestedData());
  assert.equal(frozenAlong(shape.root, new Proxy(frozen, {})), false);
  const inside = nestedData();
  inside.rest = new Proxy(freezeContainers(inside.rest), {});
  assert.equal(frozenAlong(shape.root, freezeContainers(inside)), false);
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
  // (readData does not write the value passed through: a copy would, and a
  // frozen result refuses it.)
  const data = freezeContainers(fittingData());
  readData(record, data, result);
  readData(record, data, result); // the data checked deep-frozen
  Object.freeze(result);
  readData(record, data, result); // the result checked deep-frozen, then its tensors read
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

const ROUNDS = Number(Deno.env.get("MTC_FROZEN_ROUNDS") ?? 4000);

/** A class whose instances pass through (while its prototype's prototype is Object.prototype). */
class Label {}

// The differential test of the frozen path: one record kept across rounds
// against a record made afresh each round, on the same data and result,
// changed between rounds in the ways a user can change them.
Deno.test("readData: a kept record reads frozen and changing structures as a fresh one does", () => {
  // (More rounds, another seed: MTC_FROZEN_ROUNDS, MTC_FROZEN_SEED.)
  let seed = Number(Deno.env.get("MTC_FROZEN_SEED") ?? 20261125);
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
  const revokes: (() => void)[] = [];
  const revoked = new WeakSet<object>();
  const labels: Label[] = [];
  const start = { ...frozenCounts };
  try {
    rounds();
  } finally {
    Object.setPrototypeOf(Label.prototype, Object.prototype);
  }
  // The frozen path ran, many times.
  assert.ok(
    frozenCounts.structure - start.structure > 300,
    `${frozenCounts.structure - start.structure}`,
  );

  function rounds(): void {
    for (; round < ROUNDS; round++) {
      // Made before the round's changes, as a result's record is made at its
      // first copy and kept: one of its tensors replaced since is refused.
      const fresh = buildRecord(result, CUDA0);
      const change = rand();
      // (A revoked proxy cannot be read by the test either: a new root to derive from.)
      const base = revoked.has(data) ? nestedData() : data;
      let undo = () => {};
      if (change < 0.4) {
        // Unchanged: the same root again.
      } else if (change < 0.55) {
        data = frozenCopy(pick([base, nestedData()]));
      } else if (change < 0.62) {
        data = { first: { ...base.first }, rest: [{ ...base.rest[0] }], tag: base.tag };
      } else if (change < 0.68) {
        // A leaf changed in place (refused where the root is frozen).
        const at = pick([base.first, base.rest[0]]) as Record<string, unknown>;
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
        const copy = { first: { ...base.first }, rest: [{ ...base.rest[0] }], tag: 0 };
        Object.defineProperty(copy, "tag", { get: () => round % 3, enumerable: true });
        data = freezeContainers(copy);
      } else if (change < 0.8) {
        // A leaf's bytes gone: a tensor disposed, or a buffer detached.
        const at = pick([base.first, base.rest[0]]);
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
      } else if (change < 0.91) {
        // The result's container replaced, for this round.
        const rest = result.rest;
        result.rest = [madeResult().result];
        undo = () => result.rest = rest;
      } else if (change < 0.93) {
        // A frozen root behind a proxy: revoked, or listing its keys reversed, later.
        const { proxy, revoke } = Proxy.revocable(frozenCopy(base), {});
        const reversed = new Proxy(frozenCopy(base), {
          ownKeys: (target) =>
            round % 2 === 0 ? Reflect.ownKeys(target) : Reflect.ownKeys(target).reverse(),
        });
        data = pick([proxy, reversed]) as typeof data;
        revokes.push(() => {
          revoke();
          revoked.add(proxy);
        });
      } else if (change < 0.95) {
        // A value passed through that is an object (frozen or not), its
        // prototype (or its prototype's) changed later: a plain object or a
        // Map is walked, not passed through.
        const label = new Label();
        if (rand() < 0.5) Object.freeze(label);
        labels.push(label);
        const copy = frozenCopy(base);
        data = freezeContainers({ ...copy, tag: label as unknown as number });
      } else if (change < 0.96) {
        if (revokes.length > 0) revokes.pop()!();
        const label = labels[labels.length - 1];
        if (label !== undefined && !Object.isFrozen(label)) {
          Object.setPrototypeOf(label, pick([Object.prototype, Label.prototype]));
        }
        Object.setPrototypeOf(Label.prototype, pick([Object.prototype, Map.prototype]));
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
  }
});

Deno.test("readData: a frozen result is not read again, a proxy of one always is", () => {
  let seed = 7;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  for (const behindProxy of [false, true]) {
    const plain = freezeContainers(nestedResult());
    const { proxy, revoke } = Proxy.revocable(plain, {});
    const result = behindProxy ? proxy : plain;
    const kept = buildRecord(result, CUDA0);
    let data = freezeContainers(nestedData());
    const start = { ...frozenCounts };
    const outcome = (record: IntoRecord | Error) => {
      if (record instanceof Error) return "refused";
      try {
        const passes = readData(record, data, result);
        return { passes, views: [...record.views], state: [...record.groupState] };
      } catch {
        return "refused";
      }
    };
    for (let round = 0; round < 600; round++) {
      let fresh: IntoRecord | Error;
      try {
        fresh = buildRecord(result, CUDA0);
      } catch (error) {
        fresh = error as Error;
      }
      const change = rand();
      if (change < 0.15) data = freezeContainers(nestedData());
      else if (change < 0.2) data = { ...data, tag: 3 };
      else if (change < 0.25) data.first.boxes.dispose();
      if (behindProxy && round === 300) revoke();
      assert.deepEqual(outcome(kept), outcome(fresh), `round ${round}`);
    }
    const skipped = frozenCounts.result - start.result;
    if (behindProxy) assert.equal(skipped, 0);
    else assert.ok(skipped > 100, `${skipped} skipped`);
    assert.ok(frozenCounts.structure - start.structure > 100);
  }
});

Deno.test("readData: a result's getter that changes a value passed through is seen by the frozen path too", () => {
  // The full check tests each value passed through at its place, after the
  // result's reads before it; a getter there may make the value a plain
  // object, which is walked, not passed through.
  const { result } = madeResult();
  const value = new Label();
  let armed = false;
  const boxes = result.boxes;
  Object.defineProperty(result, "boxes", {
    get: () => {
      if (armed) {
        armed = false;
        Object.setPrototypeOf(value, Object.prototype);
      }
      return boxes;
    },
    enumerable: true,
    configurable: true,
  });
  const data = freezeContainers({ ...fittingData(), name: value as unknown as string });
  const kept = buildRecord(result, CUDA0);
  for (let i = 0; i < 3; i++) readData(kept, data, result);
  const before = frozenCounts.structure;
  for (const record of [kept, buildRecord(result, CUDA0)]) {
    Object.setPrototypeOf(value, Label.prototype);
    armed = true;
    assert.throws(() => readData(record, data, result), /at \$\.name/);
  }
  assert.equal(frozenCounts.structure, before, "the frozen path ran, and refused");
});
