import assert from "node:assert/strict";
import { shown } from "../src/shown.ts";

Deno.test("shown writes primitives as String does, -0 as -0 and a Symbol by its description", () => {
  assert.equal(shown(1.5), "1.5");
  assert.equal(shown(-0), "-0");
  assert.equal(shown(0), "0");
  assert.equal(shown(NaN), "NaN");
  assert.equal(shown(10n), "10");
  assert.equal(shown("text"), "text");
  assert.equal(shown(undefined), "undefined");
  assert.equal(shown(null), "null");
  assert.equal(shown(true), "true");
  assert.equal(shown(Symbol("s")), "Symbol(s)");
});

Deno.test("shown writes an object as its class's name in parentheses", () => {
  assert.equal(shown(new Map()), "(Map)");
  assert.equal(shown([]), "(Array)");
  assert.equal(shown({}), "(Object)");
  assert.equal(shown(new Float32Array(1)), "(Float32Array)");
});

Deno.test("shown writes a function as (a function), whatever its name", () => {
  assert.equal(shown(() => 0), "(a function)");
  assert.equal(shown(class Named {}), "(a function)");
});

Deno.test("shown never throws: null prototype, throwing toString, throwing and revoked Proxies", () => {
  assert.equal(shown(Object.create(null)), "(an object)");
  assert.equal(shown({ toString: () => assert.fail("toString was called") }), "(Object)");
  const throwing = new Proxy({}, {
    get() {
      throw new Error("trap");
    },
  });
  assert.equal(shown(throwing), "(an object)");
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  assert.equal(shown(proxy), "(an object)");
  assert.equal(shown({ constructor: { name: "" } }), "(an object)");
  assert.equal(shown({ constructor: { name: 5 } }), "(an object)");
});
