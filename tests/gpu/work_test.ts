import assert from "node:assert/strict";
import { deviceCount, GpuWork, loadModule } from "../../mod.ts";
import { deferWork } from "../../src/gpu/deferred_work.ts";
import { enqueueWorkWait, holdUntilDone, whenWorkQueued } from "../../src/gpu/work.ts";

// GpuWork: made only by the library; not queued yet it cannot be waited
// for on the GPU; on a GPU, a launch's work holds what it is given until it
// completes.

Deno.test("GpuWork cannot be constructed by its users", () => {
  const Forge = GpuWork as unknown as new (...args: unknown[]) => unknown;
  assert.throws(() => new Forge(0, 0, 1, "forged"), {
    name: "TypeError",
    message: "Cannot construct a GpuWork directly: Kernel.launch() makes them",
  });
});

Deno.test("GpuWork not queued yet: no GPU wait for it, and whenWorkQueued says when it is", async () => {
  let release!: () => void;
  const ready = new Promise<void>((resolve) => release = resolve);
  const work = deferWork(0, 0x8001, "a waiting launch", ready, () => {
    throw new Error("refused");
  });
  const queued = whenWorkQueued(work);
  assert.ok(queued instanceof Promise);
  assert.throws(() => enqueueWorkWait(work, 0, 0x8002), {
    name: "Error",
    message: /^Cannot make a stream wait on the GPU for a waiting launch, which is not queued yet/,
  });
  release();
  await queued;
  assert.equal(whenWorkQueued(work), undefined);
  // Failed before it was queued: waiting for it rethrows its failure.
  assert.throws(() => enqueueWorkWait(work, 0, 0x8002), { message: "refused" });
});

Deno.test("holdUntilDone: work that has settled holds nothing more", async () => {
  const work = deferWork(0, 0x8003, "a refused launch", Promise.resolve(), () => {
    throw new Error("refused");
  });
  await work.queued().catch(() => {});
  let released = 0;
  assert.equal(holdUntilDone(work, { release: () => void released++ }), false);
  assert.equal(released, 0);
});

const NOOP = `.version 7.0
.target sm_75
.address_size 64
.visible .entry noop() { ret; }`;

Deno.test({
  name: "GpuWork of a launch: held values are released once it completes; ready() and done() agree",
  ignore: deviceCount() === 0,
  async fn() {
    const module = await loadModule(NOOP);
    try {
      const work = module.kernel("noop", []).launch({ grid: 1, block: 1, args: [] });
      let released = 0;
      const held = holdUntilDone(work, { release: () => void released++ });
      await work.done();
      assert.ok(work.ready());
      assert.equal(released, held ? 1 : 0);
      assert.equal(Deno.inspect(work), 'GpuWork(kernel "noop", done)');
      assert.equal(holdUntilDone(work, { release: () => void released++ }), false);
      await work.queued();
    } finally {
      module.dispose();
    }
  },
});
