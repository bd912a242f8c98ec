/**
 * Findings of the sixth session's review in tensors, their arguments,
 * disposal and copy handles: forged instances, argument messages that threw
 * while being built, options read through the prototype chain. Each test
 * failed on the code before its fix (1c02435).
 */
import assert from "node:assert/strict";
import { disposeAll, startCopy, Tensor } from "../mod.ts";

Deno.test({
  name: "new Tensor() from user code throws TypeError, as new HostArena() does",
  fn: async () => {
    // Tensor's constructor is private only to TypeScript: at run time it
    // makes a CPU tensor with neither data nor storage, which startCopy
    // accepts and whose toTypedArray() fails on an internal TypeError.
    const Forge = Tensor as unknown as new (...args: unknown[]) => Tensor;
    let forged: Tensor | undefined;
    assert.throws(() => {
      forged = new Forge("float32", [1], -1, 4);
    }, { name: "TypeError", message: /^Cannot construct a Tensor directly/ });
    if (forged) await startCopy([forged], "cpu").get();
  },
});

Deno.test({
  name:
    "Tensor.from names a shape that is not an array with TypeError, and a hostile dtype without failing on its message",
  fn: () => {
    for (const shape of [2, null, { length: 1, 0: 2 }, Symbol("s")]) {
      assert.throws(() => Tensor.from(new Float32Array(2), shape as never), {
        name: "TypeError",
        message: /^Invalid shape/,
      }); // was "shape is not iterable"
    }
    for (
      const dtype of [Object.create(null), {
        toString() {
          throw new Error("toString called");
        },
      }]
    ) {
      assert.throws(() => Tensor.from(new Float32Array(2), undefined, dtype), {
        name: "TypeError",
        message: /^Invalid dtype/,
      }); // was "Cannot convert object to primitive value" / "toString called"
    }
  },
});

Deno.test({
  name: "Tensor.from keeps no negative zero in a shape",
  fn: () => {
    const empty = Tensor.from(new Float32Array(0), [-0]);
    assert.deepEqual(empty.shape, [0]); // shape was [-0]: Object.is(-0, 0) is false
  },
});

Deno.test({
  name: "dispose() and disposeAll() refuse options that are not an object, as startCopy does",
  fn: () => {
    const tensor = Tensor.from(new Float32Array(1));
    for (const options of [5, "after", true]) {
      assert.throws(() => tensor.dispose(options as never), TypeError);
      assert.throws(() => disposeAll([tensor], options as never), TypeError);
    }
    assert.equal(tensor.disposed, false, "a refused call disposed the tensor");
  },
});

Deno.test({
  name:
    "a forged AsyncCopyHandle (through handle.constructor) throws TypeError and leaves later copies unharmed",
  fn: async () => {
    // The constructor registered the handle in the in-flight list before it
    // failed: every later startCopy, CPU ones included, then threw
    // "Cannot read properties of undefined (reading 'length')" from
    // reapFinished(). Run in a subprocess: the poisoning is for the process.
    const script = `import { startCopy } from ${
      JSON.stringify(new URL("../mod.ts", import.meta.url).href)
    };
const Handle = startCopy([], "cpu").constructor;
try { new Handle({ stats: {} }); } catch (error) {
  if (!(error instanceof TypeError) || !/^Cannot construct/.test(error.message)) throw error;
}
const [copied] = await startCopy([new Float32Array([1])], "cpu").get();
console.log(copied.toTypedArray()[0]);`;
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--quiet", script],
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(output.stderr);
    assert.equal(output.code, 0, stderr);
    assert.equal(new TextDecoder().decode(output.stdout).trim(), "1");
  },
});

Deno.test({
  name: "an after on Object.prototype changes no copy or disposal",
  fn: async () => {
    // startCopy, disposeAll and dispose read `options?.after` through the
    // prototype chain: every call with an options object then threw
    // "Invalid option after". Fix: read it as an own property only.
    const prototype = Object.prototype as Record<string, unknown>;
    prototype.after = 5;
    try {
      const [copied] = await startCopy([new Float32Array(1)], "cpu", {}).get();
      disposeAll([copied], {});
      Tensor.from(new Float32Array(1)).dispose({});
    } finally {
      delete prototype.after;
    }
  },
});
