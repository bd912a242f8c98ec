// Hooks for compiled plans in tests: a Tensor leaf class, a generic walk
// that records what it was handed and returns a marker.
import { Tensor } from "../../mod.ts";
import type { PlanHooks } from "../../src/walk/plan.ts";

/** Test hooks; `visited` lists the values handed to the generic walk, with their depth. */
export function recordingHooks(): PlanHooks & { visited: [unknown, number][] } {
  const visited: [unknown, number][] = [];
  const REJECTED = Symbol("rejected");
  const NO_LEAF = -1;
  return {
    visited,
    visit(value, depth) {
      visited.push([value, depth]);
      return "generic";
    },
    visitByKeys: () => false,
    // Any view but a DataView, as class code 0.
    leafCode: (value) => ArrayBuffer.isView(value) && !(value instanceof DataView) ? 0 : NO_LEAF,
    noCode: NO_LEAF,
    leafData: (tensor) => tensor.disposed ? REJECTED : "tensor data",
    rejected: REJECTED,
    leafClass: Tensor,
    // The disposal as dispose() does it, one tensor at a time.
    disposeLeaf: (tensor) => tensor.dispose(),
    beginDisposal: () => undefined,
    endDisposal: () => {},
  };
}

/** A sink whose `add` returns `[leaf, data]`. */
export const pairSink = { add: (leaf: unknown, data: unknown): unknown => [leaf, data] };
