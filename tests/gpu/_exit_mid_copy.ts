/**
 * For tests/gpu/exit_test.ts: starts a large pageable copy (background
 * staging on several threads), then exits after `Deno.args[0]` ms, while
 * the staging calls still run.
 */

import { startCopy } from "../../mod.ts";

startCopy(Array.from({ length: 32 }, (_, i) => new Float32Array(2 << 20).fill(i)), "cuda:0");
await new Promise((resolve) => setTimeout(resolve, Number(Deno.args[0])));
Deno.exit(0);
