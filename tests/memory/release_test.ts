import assert from "node:assert/strict";
import { releaseCachedMemory } from "../../mod.ts";

Deno.test("releaseCachedMemory() frees nothing when no pool holds idle memory", () => {
  releaseCachedMemory();
  assert.equal(releaseCachedMemory(), 0);
});
