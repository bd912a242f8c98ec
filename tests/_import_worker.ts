/** A Worker for tests/worker_import_test.ts: imports the package, then listens. */

import { startCopy } from "../mod.ts";

const worker = self as unknown as {
  onmessage: (event: MessageEvent<string>) => void;
  postMessage(message: unknown): void;
};
worker.onmessage = ({ data }) =>
  worker.postMessage(`${data === "ping" ? "pong" : "?"}: a ${typeof startCopy}`);
