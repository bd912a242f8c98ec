/**
 * The code generator of compiled plans: the JavaScript of a plan's walk
 * (`run`) and of its disposal (`dispose`), from the plan's nodes (see
 * plan.ts for what a plan is).
 *
 * @module
 */

import type { PlanNode } from "./plan.ts";

/** A plain-object node of a plan. */
type ObjectNode = Extract<PlanNode, { kind: "object" }>;

/**
 * The code of `root`'s plan: the body of a function that returns `{ run,
 * runPacked, dispose }`, with the key lists it names as `K0`, `K1`, .... Each node
 * becomes inline code that checks the value and builds its output, or
 * calls the generic walk.
 */
export function planSource(root: PlanNode): { source: string; keyLists: (readonly string[])[] } {
  const keyLists: (readonly string[])[] = [];
  let names = 0;
  const fresh = (prefix: string) => `${prefix}${names++}`;
  const lines: string[] = [];
  const generic = (v: string, depth: number) => `visit(${v}, ${depth}, anc, sink)`;
  // A primitive as it is, any object through `call`.
  const passOr = (v: string, call: string) =>
    `${v} === null || typeof ${v} !== "object" ? ${v} : ${call}`;

  // Emits the check that `v` is a plain object with exactly the node's
  // keys, in order, into a new variable, and returns its name.
  // `unlessClean`: the last key's check is skipped while the variable
  // `clean` says Object.prototype has no enumerable key (see `run`).
  const objectCheck = (node: ObjectNode, v: string, indent: string, unlessClean: boolean) => {
    const k = keyLists.push(node.keys) - 1;
    const j = fresh("j"), key = fresh("k"), ok = fresh("ok");
    const proto = node.nullPrototype ? "null" : "ObjectPrototype";
    const n = node.keys.length;
    // Exact own keys in order, without allocating: for-in lists own
    // enumerable string keys in Object.keys order, then inherited
    // enumerable ones (none on Object.prototype, unless it was changed).
    // The inherited ones come last: where the last key listed is own,
    // every key listed is.
    const own = `hasOwnProperty.call(${v}, K${k}[${n - 1}])`;
    // (A key whose inherited value is undefined disposes nothing: the
    // disposal checks only keys Object.prototype has a value for.)
    const inherited = `ObjectPrototype[${JSON.stringify(node.keys[n - 1])}] !== undefined`;
    const ownLast = node.nullPrototype || n === 0
      ? ""
      : unlessClean
      ? ` || (!clean && !${own})`
      : ` || (${inherited} && !${own})`;
    // The test for MAP_PROBE (a symbol no object has; see plan_compiler.ts)
    // comes first: its feedback gives V8 the object's map, which lets it
    // fold getPrototypeOf into a constant; without it getPrototypeOf is a
    // call into C++ of ~12 ns per object, on each of a batch's objects in
    // the walk and again in the disposal. An `in` test, not a read: a
    // proxy's `get` trap (which may throw on keys it does not know) is not
    // called; one whose `has` trap answers it takes the generic walk.
    lines.push(
      `${indent}let ${ok} = typeof ${v} === "object" && ${v} !== null && !(MAP_PROBE in ${v}) && getPrototypeOf(${v}) === ${proto};`,
      `${indent}if (${ok}) {`,
      `${indent}  let ${j} = 0;`,
      `${indent}  for (const ${key} in ${v}) {`,
      `${indent}    if (${key} !== K${k}[${j}]) { ${ok} = false; break; }`,
      `${indent}    ${j}++;`,
      `${indent}  }`,
      `${indent}  if (${j} !== ${n}${ownLast}) ${ok} = false;`,
      `${indent}}`,
    );
    return ok;
  };

  // Emits code that puts the walk of `v` (at `depth`) into variable `out`;
  // `packed`: the leaves are offered to the sink's packed walk first.
  let packed = false;
  const emit = (node: PlanNode, v: string, depth: number, out: string, indent: string) => {
    switch (node.kind) {
      case "leaf": {
        // The leaf's checks inline (a disposed tensor, one whose data
        // shrank, or an empty TypedArray, which may be detached, goes to
        // the generic walk, which checks it and throws its error).
        const checked = `visitCounting(${v}, ${depth}, anc, sink, plan)`;
        if (!packed) {
          lines.push(
            `${indent}if (${v} instanceof Leaf && (d = leafData(${v})) !== REJECTED) ${out} = sink.add(${v}, d, NO_CODE);`,
            `${indent}else if ((c = leafCode(${v})) !== NO_CODE && ${v}.byteLength !== 0) ${out} = sink.add(${v}, ${v}, c);`,
            `${indent}else ${out} = ${passOr(v, checked)};`,
          );
          return;
        }
        // The same, after the sink's packed walk declined the leaf.
        lines.push(
          `${indent}if (${v} instanceof Leaf) {`,
          `${indent}  if ((r = P.tensor(${v})) === NOT_TAKEN) r = (d = leafData(${v})) !== REJECTED ? sink.add(${v}, d, NO_CODE) : ${checked};`,
          `${indent}  ${out} = r;`,
          `${indent}} else if ((c = leafCode(${v})) !== NO_CODE) {`,
          `${indent}  if ((r = P.array(${v}, c)) === NOT_TAKEN) r = ${v}.byteLength !== 0 ? sink.add(${v}, ${v}, c) : ${checked};`,
          `${indent}  ${out} = r;`,
          `${indent}} else ${out} = ${passOr(v, checked)};`,
        );
        return;
      }
      case "none":
      case "other":
        // A container or a leaf here is a miss: the structure grew past the
        // plan, or the plan was made from an output with no tensors here.
        lines.push(
          `${indent}${out} = ${passOr(v, `visitCountingLeaves(${v}, ${depth}, anc, sink, plan)`)};`,
        );
        return;
      case "generic":
        lines.push(`${indent}${out} = ${passOr(v, generic(v, depth))};`);
        return;
      case "array": {
        const n = fresh("n"), o = fresh("o"), i = fresh("i"), e = fresh("e"), r = fresh("r");
        lines.push(
          `${indent}if (Array.isArray(${v}) && !visitByKeys(${v})) {`,
          `${indent}  anc[${depth}] = ${v};`,
          `${indent}  const ${n} = ${v}.length, ${o} = new Array(${n});`,
          `${indent}  for (let ${i} = 0; ${i} < ${n}; ${i}++) {`,
          `${indent}    const ${e} = ${v}[${i}];`,
          `${indent}    let ${r};`,
        );
        emit(node.element, e, depth + 1, r, `${indent}    `);
        lines.push(
          `${indent}    ${o}[${i}] = ${r};`,
          `${indent}  }`,
          `${indent}  ${out} = ${o};`,
          `${indent}} else {`,
          `${indent}  plan.misses++;`,
          `${indent}  ${out} = ${generic(v, depth)};`,
          `${indent}}`,
        );
        return;
      }
      case "object": {
        const ok = objectCheck(node, v, indent, true);
        lines.push(`${indent}if (${ok}) {`, `${indent}  anc[${depth}] = ${v};`);
        // Every value is read before any is visited, as the generic walk does.
        const values = node.keys.map(() => fresh("v"));
        const outs = node.keys.map(() => fresh("w"));
        node.keys.forEach((name, i) =>
          lines.push(`${indent}  const ${values[i]} = ${v}[${JSON.stringify(name)}];`)
        );
        node.values.forEach((child, i) => {
          lines.push(`${indent}  let ${outs[i]};`);
          emit(child, values[i], depth + 1, outs[i], `${indent}  `);
        });
        const fields = node.keys.map((name, i) => `${JSON.stringify(name)}: ${outs[i]}`);
        if (node.nullPrototype) fields.unshift("__proto__: null");
        lines.push(
          `${indent}  ${out} = { ${fields.join(", ")} };`,
          `${indent}} else {`,
          `${indent}  plan.misses++;`,
          `${indent}  ${out} = ${generic(v, depth)};`,
          `${indent}}`,
        );
        return;
      }
    }
  };

  // Emits code that disposes every tensor in `v` (at `depth`); the rest of
  // the structure goes to `rest` (the generic disposal), which returns
  // false when it gave up (too deep), and so does the plan's function.
  const emitDispose = (node: PlanNode, v: string, depth: number, indent: string) => {
    const rest =
      `if (${v} !== null && typeof ${v} === "object" && !rest(${v}, ${depth}, anc)) return false;`;
    switch (node.kind) {
      case "leaf":
        lines.push(
          `${indent}if (${v} instanceof Leaf) disposeLeaf(${v}, B);`,
          `${indent}else ${rest}`,
        );
        return;
      case "none":
      case "other":
      case "generic":
        lines.push(`${indent}${rest}`);
        return;
      case "array": {
        const n = fresh("n"), i = fresh("i"), e = fresh("e");
        lines.push(
          `${indent}if (Array.isArray(${v}) && !visitByKeys(${v})) {`,
          `${indent}  anc[${depth}] = ${v};`,
          `${indent}  for (let ${i} = 0, ${n} = ${v}.length; ${i} < ${n}; ${i}++) {`,
          `${indent}    const ${e} = ${v}[${i}];`,
        );
        emitDispose(node.element, e, depth + 1, `${indent}    `);
        lines.push(`${indent}  }`, `${indent}} else ${rest}`);
        return;
      }
      case "object": {
        const ok = objectCheck(node, v, indent, false);
        lines.push(`${indent}if (${ok}) {`, `${indent}  anc[${depth}] = ${v};`);
        node.keys.forEach((name, i) => {
          const value = fresh("v");
          lines.push(`${indent}  const ${value} = ${v}[${JSON.stringify(name)}];`);
          emitDispose(node.values[i], value, depth + 1, `${indent}  `);
        });
        lines.push(`${indent}} else ${rest}`);
        return;
      }
    }
  };

  // Whether Object.prototype has an enumerable key is checked once a run
  // (its objects then need no check of their own each): before, and after
  // the run, since a getter (or proxy) of the input could add one midway,
  // and then the run's output cannot be trusted. A disposal cannot be
  // undone: it checks each object whose last key Object.prototype has a
  // value for (a cheap load that finds nothing, as a rule).
  lines.push(`"use strict";`);
  // Two walks: `run`, and `runPacked` for a sink with a packed walk (one
  // function each keeps the other's leaf sites as they were).
  for (const [name, withPacked] of [["run", false], ["runPacked", true]] as const) {
    packed = withPacked;
    lines.push(
      `function ${name}(root, anc, sink) {`,
      `  let result, d, c, r;`,
      withPacked ? `  const P = sink.packedWalk;` : ``,
      `  const clean = noInheritedKeys();`,
    );
    emit(root, "root", 0, "result", "  ");
    lines.push(
      `  if (clean && !noInheritedKeys()) inheritedKeysAdded();`,
      `  return result;`,
      `}`,
    );
  }
  // The tensors' holds are dropped per storage, together (`B`), also where
  // a getter throws midway: those marked disposed by then lose theirs.
  lines.push(`function dispose(root, anc, rest) {`, `  const B = beginDisposal();`, `  try {`);
  emitDispose(root, "root", 0, "    ");
  lines.push(
    `  } finally { endDisposal(B); }`,
    `  return true;`,
    `}`,
    `return { run, runPacked, dispose };`,
  );
  return { source: lines.join("\n"), keyLists };
}
