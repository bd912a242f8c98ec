import assert from "node:assert/strict";
import { getHostView, shimInfo } from "../../ffi/library.ts";
import { hostLedger, pinnedArrayBuffer, pinnedBuffersCounted } from "../../ffi/native.ts";
import { testAids } from "../../ffi/test_aids.ts";
import { collectUntil } from "../_helpers.ts";

// The shim counts JS buffers over pinned memory (native/host_views.c) so
// that memory a user moved away with `transfer()` or `postMessage` is never
// freed or reused under the moved buffer. The ledger needs no driver: here
// it counts buffers over ordinary memory this test owns.

const aids = { ignore: testAids === undefined };

/** 64 bytes this test owns (off V8's heap: they never move), and their address. */
function ownMemory(): { memory: Uint8Array; address: number } {
  const memory = new Uint8Array(new ArrayBuffer(64));
  const address = Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(memory)));
  return { memory, address };
}

Deno.test("the shim is also a Node-API module: Deno gives it hostView, and pinnedArrayBuffer makes its buffers", () => {
  const hostView = getHostView();
  assert.equal(typeof hostView, "function");
  const { memory, address } = ownMemory();
  const buffer = pinnedArrayBuffer(address, 16);
  new Uint8Array(buffer)[3] = 42;
  assert.equal(memory[3], 42, "a view of the memory, not a copy");
  assert.equal(pinnedBuffersCounted(), true);
  buffer.transfer(0); // counted no more before `memory` can go
  assert.throws(() => hostView!(0, 8), { message: /a non-zero address and a size/ });
  assert.throws(() => (hostView as (a: number) => ArrayBuffer)(address), {
    message: /a non-zero address and a size/,
  });
  assert.throws(() => hostView!(address, -1), { message: /a non-zero address and a size/ });
});

Deno.test({
  ...aids,
  name:
    "each buffer is counted until V8 drops it: a same-length transfer() carries the count with the memory, transfer(0) ends it at once, collection ends a moved one's (needs the test-aid build)",
  async fn() {
    const { memory, address } = ownMemory();
    const views = () => testAids!.hostViews(address);
    const first = pinnedArrayBuffer(address, 64);
    const second = pinnedArrayBuffer(address, 64);
    assert.equal(views(), 2);
    let moved: ArrayBuffer | undefined = first.transfer();
    assert.equal(first.detached, true);
    assert.equal(views(), 2, "the moved buffer still reaches the memory");
    new Uint8Array(moved)[0] = 7;
    assert.equal(memory[0], 7, "a same-length transfer moves the memory, not a copy");
    second.transfer(0);
    assert.equal(views(), 1, "transfer(0) lets go of the memory at once");
    let cloned: ArrayBuffer | undefined = structuredClone(moved, { transfer: [moved] });
    assert.equal(views(), 1);
    moved = undefined;
    assert.equal(new Uint8Array(cloned)[0], 7);
    cloned = undefined;
    await collectUntil(() => views() === 0, "the moved buffer's finalizer");
  },
});

Deno.test({
  ...aids,
  name:
    "a buffer posted to a Worker is counted there until the Worker ends (needs the test-aid build)",
  async fn() {
    const { address } = ownMemory();
    const views = () => testAids!.hostViews(address);
    const source = "self.onmessage = (event) => { globalThis.kept = event.data; " +
      "self.postMessage(new Uint8Array(event.data)[5]); };";
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    const worker = new Worker(url, { type: "module" });
    try {
      const buffer = pinnedArrayBuffer(address, 64);
      new Uint8Array(buffer)[5] = 9;
      const reply = new Promise((resolve) => worker.onmessage = (event) => resolve(event.data));
      worker.postMessage(buffer, [buffer]);
      assert.equal(await reply, 9, "the Worker reads the memory");
      assert.equal(views(), 1, "kept by the Worker");
    } finally {
      worker.terminate();
      URL.revokeObjectURL(url);
    }
    await collectUntil(() => views() === 0, "the ended Worker's buffer's finalizer");
  },
});

Deno.test("a second copy of the shim (another file) keeps another ledger, which its module's token tells apart", async () => {
  // getHostView() compares the module's `ledger` with the library's: a file
  // replaced on disk after the library was opened loads as a second copy,
  // whose counts no free of this library would see.
  const { file } = shimInfo();
  const copy = await Deno.makeTempFile({ suffix: ".so" });
  try {
    await Deno.copyFile(file!.openPath, copy);
    const process = (globalThis as unknown as {
      process: { dlopen(module: { exports: unknown }, path: string): void };
    }).process;
    const module = { exports: {} as { ledger?: number; hostView?: unknown } };
    process.dlopen(module, copy);
    assert.equal(typeof module.exports.hostView, "function");
    assert.equal(typeof module.exports.ledger, "number");
    assert.notEqual(module.exports.ledger, hostLedger());
  } finally {
    await Deno.remove(copy);
  }
});
