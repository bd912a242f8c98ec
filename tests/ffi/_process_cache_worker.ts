/**
 * A Worker for tests/ffi/process_cache_test.ts: registers a block of
 * bookkeeping only (a made-up address, of a device index no machine has, so
 * that nothing ever uses or frees real memory through it) with the shim's
 * process-wide cache, says so, and is then terminated holding it.
 */

import { blockAdopt } from "../../ffi/process_cache.ts";

const worker = self as unknown as {
  onmessage: (event: MessageEvent<{ kind: number; size: number }>) => void;
  postMessage(message: unknown): void;
};

worker.onmessage = ({ data }) => {
  const block = blockAdopt(data.kind, 0x5000_0000, data.size);
  worker.postMessage(block.id);
};
