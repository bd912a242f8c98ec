/**
 * The compiled walk (plans and object shapes) against the generic walk and
 * against a plain reference walk written from the contract, on random
 * structures with hostile keys, changed at random between copies.
 *
 * `deno task test` runs a fixed seed; for more, set `MTC_DIFF_TRIALS` (and
 * `MTC_DIFF_SEED`), e.g. `MTC_DIFF_TRIALS=100000 deno test --allow-env
 * --allow-read --allow-ffi tests/walk/differential_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { disposeAll, startCopy, Tensor } from "../../mod.ts";
import { random } from "../../examples/reference_batch.ts";
import { ARRAY_CLASSES, NO_CODE } from "../../src/array_code.ts";
import { isTypedArray } from "../../src/dtype.ts";
import {
  forgetPlans,
  planStats,
  resetCompiledWalks,
  useCompiledWalks,
} from "../../src/walk/plan_cache.ts";
import { walk } from "../../src/walk/walk.ts";
import { shapeStats } from "../../src/walk/object_shapes.ts";

const TRIALS = Number(Deno.env.get("MTC_DIFF_TRIALS") ?? 2000);
const SEED = Number(Deno.env.get("MTC_DIFF_SEED") ?? 1);

/** The internal type name of a TypedArray (what `Object.prototype.toString` would say, untagged). */
const internalName = Object.getOwnPropertyDescriptor(
  Object.getPrototypeOf(Int8Array.prototype),
  Symbol.toStringTag,
)!.get!;

/** The class code a walk must hand with a leaf: its built-in class's place, none for a tensor. */
function referenceCode(leaf: unknown): number {
  if (leaf instanceof Tensor) return NO_CODE;
  const index = ARRAY_CLASSES.findIndex((cls) => cls.name === internalName.call(leaf));
  assert.ok(index >= 0, "a leaf of no built-in class");
  return index;
}

/** Arrays this long or longer with a hole are walked by their keys (longer than `SPARSE_CHECK_LENGTH`). */
const LONG = (1 << 16) + 1;

/** Keys that collide when joined, read as numbers, name prototype members, or are long. */
const KEYS = [
  "",
  "a",
  "b",
  "c",
  "a\u0000b",
  "\u0000",
  "b\u0000",
  "\u0000a",
  "0",
  "1",
  "2",
  "01",
  "-0",
  "-1",
  "1e3",
  "0x10",
  " 5",
  "+3",
  "1.5",
  "4294967295",
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "length",
  "é",
  "日本語",
  "😀",
  "\ud800",
  "\u2028",
  '"',
  "\\",
  "${a}",
  "*/",
  "k".repeat(256),
  "k".repeat(257),
  "v".repeat(100_000),
];
/** Keys an enumerable property of Object.prototype may have (none it has already). */
const POLLUTION_KEYS = ["a", "b", "c", "", "a\u0000b", "1", "zz"];

class Box {
  inner = Tensor.from(new Float32Array(1));
}
/** A TypedArray whose tag and constructor claim another class (its internal one decides). */
class Mislabelled extends Int16Array {
  // @ts-ignore: the lie is the point
  override get [Symbol.toStringTag]() {
    return "Float32Array";
  }
  static get [Symbol.species]() {
    return Float64Array;
  }
}
class Sub extends Array {}
class SubMap extends Map {}
const shared = new Date(0);

/** Getter reads, counted per walk: both walks must read each getter once. */
let reads = 0;

/** Builds random structures and changes them. */
class Maker {
  readonly rand: () => number;
  constructor(seed: number) {
    this.rand = random(seed);
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.rand() * items.length)];
  }
  chance(p: number): boolean {
    return this.rand() < p;
  }

  leaf(): unknown {
    const n = Math.floor(this.rand() * 3);
    switch (Math.floor(this.rand() * 11)) {
      case 0:
        return new Int32Array(n);
      case 1:
        return new Uint8Array(n + 1);
      case 2:
        return new BigInt64Array(n);
      case 3:
        return new Float64Array(new ArrayBuffer(32), 8, n);
      case 4:
        return Tensor.from(new Uint8Array(n + 1), [n + 1], "bool");
      case 5:
        return new Uint8ClampedArray(n + 2);
      case 6:
        return new Mislabelled(n + 1);
      case 7:
        return new DataView(new ArrayBuffer(4)); // not a leaf: passed through
      default:
        return Tensor.from(new Float32Array(n + 1));
    }
  }

  other(): unknown {
    return this.pick<() => unknown>([
      () => 0,
      () => -0,
      () => NaN,
      () => "s",
      () => "",
      () => null,
      () => undefined,
      () => true,
      () => 10n,
      () => Symbol.for("s"),
      () => shared,
      () => new Box(),
      () => new DataView(new ArrayBuffer(4)),
      () => new ArrayBuffer(2),
      () => () => 1,
      () => new Set([1]),
      () => Object.create({ inherited: 1 }),
    ])();
  }

  value(depth: number): unknown {
    const kinds = depth >= 4 ? 2 : 8;
    switch (Math.floor(this.rand() * kinds)) {
      case 0:
        return this.other();
      case 1:
        return this.leaf();
      case 2:
      case 3:
        return this.object(depth);
      case 4:
      case 5:
        return this.array(depth);
      case 6:
        return this.map(depth);
      default:
        return this.chance(0.5) ? this.leaf() : this.object(depth);
    }
  }

  key(): string {
    return this.chance(0.6) ? this.pick(KEYS.slice(1, 4)) : this.pick(KEYS);
  }

  /** A key for a property of an array: an index or a named property ("array extras"). */
  extra(): string {
    const key = this.pick(KEYS);
    return key === "length" ? "x" : key;
  }

  /** Sets `key` on a plain object as an own enumerable property (a getter at times). */
  define(object: object, key: string, value: unknown): void {
    if (this.chance(0.1)) {
      Object.defineProperty(object, key, {
        get: () => (reads++, value),
        enumerable: true,
        configurable: true,
      });
    } else {
      Object.defineProperty(object, key, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }

  object(depth: number): object {
    const object = this.chance(0.2) ? Object.create(null) : {};
    const count = Math.floor(this.rand() * 5);
    for (let i = 0; i < count; i++) this.define(object, this.key(), this.value(depth + 1));
    if (this.chance(0.05)) Object.defineProperty(object, "hidden", { value: this.leaf() });
    if (this.chance(0.05)) object[Symbol.for("extra")] = this.leaf();
    return object;
  }

  array(depth: number): unknown[] {
    const length = Math.floor(this.rand() * 5);
    const array: unknown[] = this.chance(0.05) ? new Sub() : [];
    for (let i = 0; i < length; i++) array.push(this.value(depth + 1));
    if (this.chance(0.15)) delete array[Math.floor(this.rand() * (length + 1))];
    if (this.chance(0.05)) array.length += 2; // holes at the end
    if (this.chance(0.04)) this.makeLong(array, depth);
    if (this.chance(0.15)) {
      (array as unknown as Record<string, unknown>)[this.extra()] = this.leaf();
    }
    return array;
  }

  /** Makes `array` longer than the sparse check with a few elements (walked by its keys). */
  makeLong(array: unknown[], depth: number): void {
    const at = LONG + Math.floor(this.rand() * 10);
    array[at] = this.value(depth + 1);
    if (this.chance(0.3)) array[0] = this.leaf();
  }

  map(depth: number): Map<unknown, unknown> {
    const map: Map<unknown, unknown> = this.chance(0.1) ? new SubMap() : new Map();
    const count = Math.floor(this.rand() * 3);
    for (let i = 0; i < count; i++) {
      map.set(this.chance(0.7) ? this.key() : {}, this.value(depth + 1));
    }
    return map;
  }

  /** A root: a container (plans are made of containers). */
  root(): unknown {
    return this.chance(0.5)
      ? Array.from({ length: 1 + Math.floor(this.rand() * 3) }, () => this.value(1))
      : this.object(0);
  }

  /** Changes `root` in place at 1 to 3 random containers. */
  mutate(root: unknown): void {
    const containers = containersOf(root);
    if (containers.length === 0) return;
    const changes = 1 + Math.floor(this.rand() * 3);
    for (let c = 0; c < changes; c++) this.change(this.pick(containers), root);
  }

  change(container: object, root: unknown): void {
    if (container instanceof Map) {
      if (this.chance(0.5) && container.size > 0) {
        container.delete([...container.keys()][0]);
      } else container.set(this.key(), this.value(2));
      return;
    }
    if (Array.isArray(container)) {
      const what = Math.floor(this.rand() * 8);
      if (what === 0) container.push(this.value(2));
      else if (what === 1) container.pop();
      else if (what === 2) delete container[Math.floor(this.rand() * (container.length + 1))];
      else if (what === 3) (container as unknown as Record<string, unknown>)[this.extra()] = 1;
      else if (what === 4 && this.chance(0.3)) this.makeLong(container, 2);
      else if (container.length > 0) {
        container[Math.floor(this.rand() * container.length)] = this.changed(root);
      }
      return;
    }
    const keys = Object.keys(container);
    const what = Math.floor(this.rand() * 9);
    const key = keys.length > 0 ? this.pick(keys) : this.key();
    if (Object.isFrozen(container)) return;
    if (what === 0) this.define(container, this.key(), this.value(2));
    else if (what === 1) delete (container as Record<string, unknown>)[key];
    else if (what === 2 && keys.length > 0) {
      // Moves the key to the end.
      const value = (container as Record<string, unknown>)[key];
      delete (container as Record<string, unknown>)[key];
      this.define(container, key, value);
    } else if (what === 3) {
      Object.setPrototypeOf(container, this.pick([null, Object.prototype, Box.prototype]));
    } else if (what === 4) Object.freeze(container);
    else this.define(container, key, this.changed(root));
  }

  /**
   * A key to define on Object.prototype, enumerable: at times the last key
   * of an object of `root`, deleted from it (so that the object inherits
   * the key a plan of it expects last). Not of the root or the root's
   * first element: a plan is chosen by their keys, and an inherited one
   * there already rules a plan out.
   */
  pollution(root: unknown): string {
    const first = Array.isArray(root) ? root[0] : undefined;
    const objects = containersOf(root).filter((container) =>
      Object.getPrototypeOf(container) === Object.prototype && !Object.isFrozen(container) &&
      Object.keys(container).length > 0 && container !== root && container !== first
    );
    if (objects.length > 0 && this.chance(0.7)) {
      const object = this.pick(objects) as Record<string, unknown>;
      const key = Object.keys(object).at(-1)!;
      if (!(key in Object.prototype) && key !== "__proto__") {
        delete object[key];
        return key;
      }
    }
    return this.pick(POLLUTION_KEYS);
  }

  /** A value put in place of another: a fresh value, a broken leaf, or a cycle. */
  changed(root: unknown): unknown {
    if (this.chance(0.03)) {
      const tensor = Tensor.from(new Float32Array(1));
      tensor.dispose();
      return tensor;
    }
    if (this.chance(0.03)) {
      const data = new Float32Array(2);
      data.buffer.transfer();
      return data;
    }
    if (this.chance(0.02)) return root;
    return this.value(2);
  }
}

/** Every array, Map and plain object in `root` (each once). */
function containersOf(root: unknown): object[] {
  const found: object[] = [];
  const seen = new Set<unknown>();
  const visit = (value: unknown) => {
    if (typeof value !== "object" || value === null || seen.has(value)) return;
    seen.add(value);
    if (value instanceof Tensor || isTypedArray(value)) return;
    const kind = kindOf(value);
    if (kind === "other") return;
    found.push(value);
    for (const child of childrenOf(value, kind)) visit(child);
  };
  visit(root);
  return found;
}

type Kind = "array" | "map" | "object" | "other";

/** The container kind, by the contract: arrays, Maps, objects of prototype Object.prototype or null. */
function kindOf(value: object): Kind {
  if (Array.isArray(value)) return "array";
  if (value instanceof Map) return "map";
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null ? "object" : "other";
}

/** Whether an array is walked by its keys: long, with a hole (holes elsewhere read as undefined). */
function byKeys(array: unknown[]): boolean {
  if (array.length < LONG) return false;
  for (let i = 0; i < array.length; i++) if (!(i in array)) return true;
  return false;
}

/** The indices of an array walked by its keys: canonical integers below 2^32 - 1. */
function indicesOf(array: unknown[]): number[] {
  return Object.keys(array).filter((key) =>
    String(Number(key) >>> 0) === key && key !== "4294967295"
  )
    .map(Number);
}

/** The values a walk visits in a container (reading each once). */
function childrenOf(value: object, kind: Kind): unknown[] {
  if (kind === "map") return [...(value as Map<unknown, unknown>).values()];
  if (kind === "array") {
    const array = value as unknown[];
    if (byKeys(array)) return indicesOf(array).map((i) => array[i]);
    return Array.from({ length: array.length }, (_, i) => array[i]);
  }
  return Object.keys(value).map((key) => (value as Record<string, unknown>)[key]);
}

/** One stand-in tensor per leaf position, the same in every walk. */
const standIns: Tensor[] = [];

/**
 * What a walk did: its output, the leaves and their data in order, the
 * class code it handed with each, the getters it read.
 */
interface Run {
  output?: unknown;
  error?: string;
  leaves: unknown[];
  codes: number[];
  reads: number;
}

function run(input: unknown, compiled: boolean): Run {
  useCompiledWalks(compiled);
  const leaves: unknown[] = [];
  const codes: number[] = [];
  reads = 0;
  try {
    const output = walk(input, {
      add: (leaf, data, code) => {
        codes.push(code);
        const k = leaves.push(leaf, data) / 2 - 1;
        return standIns[k] ??= Tensor.from(new Float32Array(1));
      },
    });
    return { output, leaves, codes, reads };
  } catch (error) {
    const what = `${(error as Error).name}: ${(error as Error).message}`;
    return { error: what, leaves, codes, reads };
  } finally {
    useCompiledWalks(true);
  }
}

/**
 * The walk the contract describes, written plainly: the reference for both
 * walks. Leaves are numbered in walk order (a position's stand-in).
 */
function reference(input: unknown): { output: unknown; leaves: unknown[] } {
  const leaves: unknown[] = [];
  const visit = (value: unknown): unknown => {
    if (typeof value !== "object" || value === null) return value;
    if (value instanceof Tensor || isTypedArray(value)) {
      leaves.push(value);
      return standIns[leaves.length - 1];
    }
    const kind = kindOf(value);
    if (kind === "array") {
      const array = value as unknown[];
      const output = new Array(array.length);
      if (byKeys(array)) { for (const i of indicesOf(array)) output[i] = visit(array[i]); }
      else for (let i = 0; i < array.length; i++) output[i] = visit(array[i]);
      return output;
    }
    if (kind === "map") {
      const output = new Map();
      for (const [key, child] of value as Map<unknown, unknown>) output.set(key, visit(child));
      return output;
    }
    if (kind === "other") return value;
    const output = Object.create(Object.getPrototypeOf(value));
    for (const key of Object.keys(value)) {
      Object.defineProperty(output, key, {
        value: visit((value as Record<string, unknown>)[key]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return output;
  };
  return { output: visit(input), leaves };
}

/** A value for a message (null-prototype objects have no toString). */
function describe(value: unknown): string {
  if (typeof value === "symbol" || typeof value !== "object" || value === null) {
    return String(value);
  }
  return Array.isArray(value) ? "an array" : Object.prototype.toString.call(value);
}

/**
 * Asserts two outputs are the same: containers of the same kind and
 * prototype, own keys in order (an array's holes, and named properties),
 * Map keys in order, and the same values (leaves by `sameLeaf`).
 */
function assertSame(
  a: unknown,
  b: unknown,
  sameLeaf: (a: unknown, b: unknown) => boolean,
  path = "$",
  seen = new Set<unknown>(),
): void {
  if (typeof a !== "object" || a === null || typeof b !== "object" || b === null) {
    assert.ok(Object.is(a, b), `${path}: ${describe(a)} against ${describe(b)}`);
    return;
  }
  if (a instanceof Tensor || b instanceof Tensor) {
    assert.ok(sameLeaf(a, b), `${path}: leaves differ`);
    return;
  }
  // A passed-through object is the input's, by reference.
  if (!(Array.isArray(a) || a instanceof Map || kindOf(a) === "object")) {
    assert.equal(a, b, `${path}: passed through by reference`);
    return;
  }
  if (seen.has(a)) return;
  seen.add(a);
  assert.equal(Object.getPrototypeOf(b), Object.getPrototypeOf(a), `${path}: prototype`);
  if (a instanceof Map) {
    const bm = b as Map<unknown, unknown>;
    assert.deepEqual([...bm.keys()], [...a.keys()], `${path}: Map keys`);
    for (const [key, value] of a) assertSame(value, bm.get(key), sameLeaf, `${path}.get()`, seen);
    return;
  }
  if (Array.isArray(a)) assert.equal((b as unknown[]).length, a.length, `${path}.length`);
  const keys = Object.keys(a);
  assert.deepEqual(Object.keys(b), keys, `${path}: keys in order`);
  for (const key of keys) {
    const descriptor = Object.getOwnPropertyDescriptor(b, key)!;
    assert.ok("value" in descriptor && descriptor.enumerable, `${path}[${JSON.stringify(key)}]`);
    assertSame(
      (a as Record<string, unknown>)[key],
      descriptor.value,
      sameLeaf,
      `${path}[${JSON.stringify(key).slice(0, 40)}]`,
      seen,
    );
  }
}

const sameStandIn = (a: unknown, b: unknown) => a === b;

/** Whether two copies' tensors hold the same memory with the same dtype and shape. */
function sameCopy(a: unknown, b: unknown): boolean {
  if (!(a instanceof Tensor && b instanceof Tensor)) return false;
  const x = a.toTypedArray();
  const y = b.toTypedArray();
  return a.dtype === b.dtype && a.shape.join() === b.shape.join() && x.buffer === y.buffer &&
    x.byteOffset === y.byteOffset && x.byteLength === y.byteLength;
}

/**
 * The tensors reachable through containers (those `disposeAll` must
 * dispose), and all tensors, also those inside other objects.
 */
function tensorsIn(root: unknown): { reachable: Set<Tensor>; all: Set<Tensor> } {
  const search = (throughAll: boolean) => {
    const found = new Set<Tensor>();
    const seen = new Set<unknown>();
    const visit = (value: unknown) => {
      if (typeof value !== "object" || value === null || seen.has(value)) return;
      seen.add(value);
      if (value instanceof Tensor) return void found.add(value);
      if (isTypedArray(value)) return;
      const kind = kindOf(value);
      if (kind === "other" && !throughAll) return;
      const children = kind === "other"
        ? Object.values(Object.getOwnPropertyDescriptors(value)).map((d) => d.value)
        : childrenOf(value, kind);
      for (const child of children) visit(child);
    };
    visit(root);
    return found;
  };
  return { reachable: search(false), all: search(true) };
}

/** Runs `run` with `value` under `key` on Object.prototype, enumerable (none where `key` is undefined). */
function polluted(key: string | undefined, value: unknown, run: () => void): void {
  if (key === undefined) return run();
  Object.defineProperty(Object.prototype, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
  try {
    run();
  } finally {
    delete (Object.prototype as Record<string, unknown>)[key];
  }
}

/** What the trials did: how many threw, ran a plan, and how many shapes were compiled. */
interface Outcome {
  errors: number;
  planned: number;
  shapes: number;
}

/** Runs `trials` trials from `seed`. */
async function differential(seed: number, trials: number): Promise<Outcome> {
  const maker = new Maker(seed);
  let errors = 0;
  let planned = 0;
  let shapes = 0;
  for (let trial = 0; trial < trials; trial++) {
    const where = `seed ${seed}, trial ${trial}`;
    if (trial % 100 === 0) {
      shapes += shapeStats().compiled;
      resetCompiledWalks();
    }
    if (maker.chance(0.1)) forgetPlans();
    const input = maker.root();
    // Walked a few times: its plan and its objects' shapes get compiled.
    const repeats = 1 + Math.floor(maker.rand() * 3);
    for (let i = 0; i < repeats; i++) run(input, true);
    // Changed, or an object made to inherit its last key (no other change:
    // the plan's check of that object is the point).
    const pollution = maker.chance(0.1) ? maker.pollution(input) : undefined;
    if (pollution === undefined && maker.chance(0.8)) maker.mutate(input);
    const inherited = maker.chance(0.5) ? Tensor.from(new Float32Array(1)) : 1;
    let generic: Run, compiled: Run, expected: ReturnType<typeof reference> | undefined;
    polluted(pollution, inherited, () => {
      generic = run(input, false);
      compiled = run(input, true);
      if (planStats().lastPlanned) planned++;
      if (generic.error === undefined) expected = reference(input);
    });
    generic = generic!;
    compiled = compiled!;
    assert.equal(compiled.error, generic.error, where);
    if (generic.error !== undefined) {
      errors++;
      continue;
    }
    assert.equal(compiled.reads, generic.reads, `${where}: getter reads`);
    assert.equal(compiled.leaves.length, generic.leaves.length, `${where}: leaves`);
    compiled.leaves.forEach((leaf, i) => assert.equal(leaf, generic.leaves[i], `${where}: leaf`));
    assert.deepEqual(compiled.codes, generic.codes, `${where}: class codes`);
    assert.deepEqual(
      generic.codes,
      expected!.leaves.map(referenceCode),
      `${where}: reference codes`,
    );
    assertSame(compiled.output, generic.output, sameStandIn, "$", new Set());
    assert.deepEqual(
      expected!.leaves,
      generic.leaves.filter((_, i) => i % 2 === 0),
      `${where}: the reference's leaves`,
    );
    assertSame(generic.output, expected!.output, sameStandIn, "$", new Set());
    if (maker.chance(0.05)) {
      // Through startCopy: the same result and the same stats either way
      // (it walks before it returns).
      let plainHandle!: ReturnType<typeof startCopy>;
      let compiledHandle!: ReturnType<typeof startCopy>;
      polluted(pollution, inherited, () => {
        useCompiledWalks(false);
        try {
          plainHandle = startCopy(input, "cpu");
        } finally {
          useCompiledWalks(true);
        }
        compiledHandle = startCopy(input, "cpu");
      });
      const [plain, fast] = await Promise.all([plainHandle.get(), compiledHandle.get()]);
      assert.deepEqual(compiledHandle.stats(), plainHandle.stats(), `${where}: stats`);
      assert.equal(compiledHandle.stats().tensors, expected!.leaves.length);
      assertSame(fast, plain, sameCopy);
    }
    if (maker.chance(pollution === undefined ? 0.2 : 0.6)) {
      // disposeAll by the plan (when one matches) disposes exactly the
      // reachable tensors, never the inherited one.
      // (An index on Object.prototype is read through a short array's
      // hole, by the walk and by disposeAll alike: it is reachable.)
      let found = tensorsIn(undefined);
      let disposedBefore: Tensor[] = [];
      polluted(pollution, inherited, () => {
        found = tensorsIn(input);
        disposedBefore = [...found.all].filter((tensor) => tensor.disposed);
        disposeAll(input);
      });
      for (const tensor of found.all) {
        const expected = found.reachable.has(tensor) || disposedBefore.includes(tensor);
        assert.equal(tensor.disposed, expected, `${where}: disposeAll`);
      }
      if (inherited instanceof Tensor) {
        assert.equal(inherited.disposed, found.reachable.has(inherited), `${where}: inherited`);
      }
    }
  }
  return { errors, planned, shapes: shapes + shapeStats().compiled };
}

Deno.test(`random structures with hostile keys, changed between copies: the compiled walk is the generic walk and the reference (${TRIALS} trials, seed ${SEED})`, async () => {
  const outcome = await differential(SEED, TRIALS);
  if (Deno.env.get("MTC_DIFF_TRIALS")) console.log(outcome);
  // Most trials succeed, and the compiled paths are taken.
  assert.ok(outcome.errors < TRIALS / 4, `${outcome.errors} of ${TRIALS} trials threw`);
  assert.ok(outcome.planned > TRIALS / 4, `${outcome.planned} of ${TRIALS} walks ran a plan`);
  assert.ok(outcome.shapes > TRIALS / 10, `${outcome.shapes} shapes compiled`);
  resetCompiledWalks();
});
