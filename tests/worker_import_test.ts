import assert from "node:assert/strict";

// A Worker that imports the package and then installs its message handler
// gets the messages posted to it at once: importing does not let the event
// loop turn (ffi/shim_file.ts), which would deliver them to no handler.

Deno.test("a Worker importing the package answers a message posted right after it started", async () => {
  const worker = new Worker(new URL("./_import_worker.ts", import.meta.url), { type: "module" });
  try {
    const answer = new Promise<unknown>((resolve, reject) => {
      worker.onmessage = (event) => resolve(event.data);
      worker.onerror = (event) => {
        event.preventDefault();
        reject(new Error(event.message));
      };
    });
    worker.postMessage("ping");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const lost = new Promise((resolve) => timer = setTimeout(() => resolve("lost"), 10_000));
    const reply = await Promise.race([answer, lost]);
    clearTimeout(timer);
    assert.equal(reply, "pong: a function");
  } finally {
    worker.terminate();
  }
});
