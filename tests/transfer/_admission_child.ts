// Run by tests/transfer/admission_test.ts with a malformed MTC_* limit
// variable: admits a CPU-bound copy moving Deno.args[0] bytes, and prints
// what admission() did.
import { CPU } from "../../src/device.ts";
import { IndexList } from "../../src/number_list.ts";
import type { Route } from "../../src/route.ts";
import { admission } from "../../src/transfer/admission.ts";

const route = {
  target: CPU,
  movedBytes: Number(Deno.args[0]),
  options: { usePinnedStaging: true, useBackgroundThread: true },
  h2d: new IndexList(),
  leaves: [],
} as unknown as Route;
try {
  console.log(admission(route) === undefined ? "admitted" : "waits");
} catch (error) {
  console.log(`${(error as Error).name}: ${(error as Error).message}`);
}
