// Run by tests/lifecycle_test.ts without permissions: imports the lifecycle
// hooks and, with the argument "release", raises one release of pooled memory.
import "../src/lifecycle.ts";
import { memoryReleased } from "../src/memory/released.ts";

if (Deno.args[0] === "release") memoryReleased();
console.log(Deno.args[0] === "release" ? "released" : "imported");
