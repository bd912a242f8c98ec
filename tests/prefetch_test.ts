import { TensorLayout } from "../src/tensor_layout.ts";
import assert from "node:assert/strict";
import { hostArena, prefetch, Tensor } from "../mod.ts";
import { BlockPool } from "../src/memory/block_pool.ts";
import { Storage } from "../src/memory/storage.ts";
import { tensorInternals } from "../src/tensor.ts";
import { vectorShape } from "../src/vector_shape.ts";

function batches(count: number, log: number[] = []): Iterable<{ ids: Int32Array }> {
  return {
    *[Symbol.iterator]() {
      for (let i = 0; i < count; i++) {
        log.push(i);
        yield { ids: new Int32Array([i, i + 1]) };
      }
    },
  };
}

async function* asyncBatches(count: number, failAt = -1) {
  for (let i = 0; i < count; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (i === failAt) throw new Error(`source failed at ${i}`);
    yield { ids: new Int32Array([i]) };
  }
}

Deno.test("prefetch() yields every batch in source order, as tensors on the device, from sync and async sources", async () => {
  const seen: number[] = [];
  for await (const batch of prefetch(batches(5), "cpu")) {
    assert.ok(batch.ids instanceof Tensor);
    seen.push(batch.ids.toTypedArray()[0] as number);
  }
  assert.deepEqual(seen, [0, 1, 2, 3, 4]);
  const fromAsync: number[] = [];
  for await (const batch of prefetch(asyncBatches(3), "cpu")) {
    fromAsync.push(batch.ids.toTypedArray()[0] as number);
  }
  assert.deepEqual(fromAsync, [0, 1, 2]);
});

Deno.test("prefetch() keeps depth batches in flight beyond the one in use", async () => {
  for (const depth of [1, 2, 4]) {
    const pulled: number[] = [];
    let step = 0;
    for await (const _ of prefetch(batches(8, pulled), "cpu", { depth })) {
      // The loop body's own awaits give the refill its turn.
      await new Promise((resolve) => setTimeout(resolve, 0));
      assert.equal(pulled.length, Math.min(step + 1 + depth, 8), `depth ${depth}, step ${step}`);
      step++;
    }
    assert.equal(step, 8);
  }
});

Deno.test("an error of the source surfaces at its iteration, after the batches before it", async () => {
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const batch of prefetch(asyncBatches(5, 2), "cpu", { depth: 3 })) {
      seen.push(batch.ids.toTypedArray()[0] as number);
    }
  }, /source failed at 2/);
  assert.deepEqual(seen, [0, 1]);
});

Deno.test("a batch that startCopy rejects surfaces at its own iteration", async () => {
  const cyclic: Record<string, unknown> = { ids: new Int32Array(1) };
  cyclic.self = cyclic;
  const source = [{ ids: new Int32Array([7]) }, cyclic, { ids: new Int32Array([9]) }];
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const batch of prefetch(source, "cpu")) {
      seen.push((batch.ids as Tensor).toTypedArray()[0] as number);
    }
  }, (error: unknown) => error instanceof TypeError && /cyclic/.test(error.message));
  assert.deepEqual(seen, [7]);
});

Deno.test("leaving the loop closes the source and stops pulling", async () => {
  let closed = false;
  let pulled = 0;
  async function* source() {
    try {
      for (let i = 0; i < 100; i++) {
        pulled++;
        yield { ids: new Int32Array([i]) };
      }
    } finally {
      closed = true;
    }
  }
  for await (const batch of prefetch(source(), "cpu", { depth: 2 })) {
    if ((batch.ids.toTypedArray()[0] as number) === 3) break;
  }
  assert.equal(closed, true);
  assert.equal(pulled, 6); // batches 0..3 used, 4 and 5 in flight
});

Deno.test("disposePrevious disposes each result when the next is taken, and the last at the end", async () => {
  const results: Tensor[] = [];
  for await (const batch of prefetch(batches(3), "cpu", { disposePrevious: true })) {
    assert.ok(results.every((t) => t.disposed));
    assert.equal(batch.ids.disposed, false);
    results.push(batch.ids);
  }
  assert.ok(results.every((t) => t.disposed));
  const kept: Tensor[] = [];
  for await (const batch of prefetch(batches(3), "cpu")) kept.push(batch.ids);
  assert.ok(kept.every((t) => !t.disposed));
});

Deno.test("prefetch() rejects a bad depth, device or option at once", () => {
  for (const depth of [0, -1, 1.5, NaN]) {
    assert.throws(() => prefetch([], "cpu", { depth }), RangeError);
  }
  assert.throws(() => prefetch([], "gpu"), TypeError);
  assert.throws(() => prefetch([], "cpu", { maxPackedChunkBytes: 0 }), RangeError);
});

Deno.test("prefetch() without a device throws TypeError at once, and never opens the source", () => {
  let opened = false;
  const source = {
    *[Symbol.iterator]() {
      opened = true;
      yield { ids: new Int32Array(1) };
    },
  };
  const expected = { name: "TypeError", message: /Invalid device undefined/ };
  assert.throws(() => (prefetch as (source: unknown) => unknown)(source), expected);
  assert.throws(() => prefetch(source, undefined as unknown as string), expected);
  assert.equal(opened, false);
});

Deno.test("prefetch() names a source that is not iterable and options that are not an object", () => {
  const call = prefetch as (source: unknown, device: string, options?: unknown) => unknown;
  for (
    const [source, shown] of [[null, "null"], [undefined, "undefined"], [42, "42"], [
      {},
      "(Object)",
    ]]
  ) {
    assert.throws(() => call(source, "cpu"), {
      name: "TypeError",
      message: `Invalid prefetch source ${shown}: expected an Iterable or an AsyncIterable`,
    });
  }
  for (const [options, shown] of [[null, "null"], [3, "3"]]) {
    assert.throws(() => call([], "cpu", options), {
      name: "TypeError",
      message: `Invalid prefetch options ${shown}: expected an object`,
    });
  }
});

/**
 * A channel: `next()` hands out what was sent, or waits for the next send
 * or for `return()`, which closes it and settles a waiting `next()` as done.
 */
function channel<T>() {
  const items: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | undefined;
  const state = { closed: false, returnCalls: 0 };
  const iterator: AsyncIterableIterator<T> = {
    next(): Promise<IteratorResult<T>> {
      if (items.length > 0) return Promise.resolve({ value: items.shift()!, done: false });
      if (state.closed) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => waiting = resolve);
    },
    return(): Promise<IteratorResult<T>> {
      state.returnCalls++;
      close();
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  const close = () => {
    state.closed = true;
    waiting?.({ value: undefined, done: true });
    waiting = undefined;
  };
  const send = (item: T) => {
    if (waiting) waiting({ value: item, done: false }), waiting = undefined;
    else items.push(item);
  };
  return { iterator, send, close, state };
}

Deno.test("leaving the loop closes a channel whose pending next() settles only when it is closed", async () => {
  const { iterator, send, close, state } = channel<{ ids: Int32Array }>();
  send({ ids: new Int32Array([0]) });
  let steps = 0;
  const loop = (async () => {
    for await (const _ of prefetch(iterator, "cpu", { depth: 2 })) {
      steps++;
      break; // a pull from the empty channel is pending now
    }
  })();
  // Every microtask of the loop's exit runs before this timer: by then the
  // source must have been closed (the old code awaited the pending pull first).
  await new Promise((resolve) => setTimeout(resolve, 0));
  const closedOnExit = state.returnCalls;
  close(); // lets a loop that missed it end, so that a failure does not hang the suite
  await loop;
  assert.equal(steps, 1);
  assert.equal(closedOnExit, 1, "the source was not closed when the loop was left");
  assert.equal(state.returnCalls, 1);
});

Deno.test("a source that delivers each batch only after the loop took the one before does not stall the loop", async () => {
  const { iterator, send, close } = channel<{ ids: Int32Array }>();
  send({ ids: new Int32Array([0]) });
  const seen: number[] = [];
  const loop = (async () => {
    for await (const batch of prefetch(iterator, "cpu", { depth: 2 })) {
      seen.push(batch.ids.toTypedArray()[0] as number);
      // Lock-step: the producer sends the next batch once this one was taken.
      if (seen.length < 3) send({ ids: new Int32Array([seen.length]) });
      else close();
    }
  })();
  // The whole loop runs in microtasks (copies to the CPU settle at once):
  // it is over before this timer (the old code waited for `depth` batches
  // before taking the first).
  await new Promise((resolve) => setTimeout(resolve, 0));
  const seenInTime = [...seen];
  close(); // lets a stalled loop end, so that a failure does not hang the suite
  await loop;
  assert.deepEqual(seenInTime, [0, 1, 2]);
});

/** A tensor on `device` bound to a fresh block of `pool` (its one hold); its bytes are never read. */
function pooledTensor(pool: BlockPool, device: number, bytes = 64): Tensor {
  const tensor = tensorInternals.create(
    new TensorLayout("float32", vectorShape(bytes / 4), bytes, device),
  );
  tensorInternals.bind(tensor, new Storage(pool, pool.acquire(bytes), 1), 0);
  return tensor;
}

/** A pool over made-up addresses: binding needs addresses, not memory. */
function addressPool(): BlockPool {
  let next = 1 << 20;
  return new BlockPool({ alloc: (bytes) => (next += bytes + 4096) - bytes, free() {} });
}

Deno.test("a source whose return() throws: the copies in flight and the last result are disposed, then the error surfaces", async () => {
  const pool = addressPool();
  // Pooled CPU tensors (as pinned results are): each result holds its block.
  const inputs = Array.from({ length: 6 }, () => pooledTensor(pool, -1));
  const source: Iterable<{ t: Tensor }> = {
    [Symbol.iterator]() {
      let i = 0;
      return {
        next: () =>
          i < inputs.length
            ? { value: { t: inputs[i++] }, done: false }
            : { value: undefined, done: true },
        return: (): IteratorResult<{ t: Tensor }> => {
          throw new Error("return failed");
        },
      };
    },
  };
  const yielded: Tensor[] = [];
  await assert.rejects(async () => {
    for await (const batch of prefetch(source, "cpu", { depth: 3, disposePrevious: true })) {
      yielded.push(batch.t);
      if (yielded.length === 2) break;
    }
  }, /return failed/);
  assert.ok(yielded.every((t) => t.disposed), "the last result was not disposed");
  assert.ok(inputs.every((t) => !t.disposed), "an input was disposed");
  for (const input of inputs) input.dispose();
  assert.equal(pool.stats().inUseBytes, 0, "a result of a copy in flight kept its block");
});

Deno.test("an error of the loop wins over one that return() throws", async () => {
  const source = {
    [Symbol.iterator]() {
      return {
        next: () => ({ value: { ids: new Int32Array(1) }, done: false }),
        return: (): IteratorResult<{ ids: Int32Array }> => {
          throw new Error("return failed");
        },
      };
    },
  };
  await assert.rejects(async () => {
    for await (const _ of prefetch(source, "cpu")) throw new Error("body failed");
  }, /body failed/);
});

Deno.test("disposePrevious disposes only what the copies made: a tensor every batch shares stays live", async () => {
  const constant = Tensor.from(new Float32Array([1, 2, 3]));
  const source = Array.from({ length: 4 }, (_, i) => ({ constant, ids: new Int32Array([i]) }));
  let steps = 0;
  for await (const batch of prefetch(source, "cpu", { disposePrevious: true })) {
    assert.deepEqual([...batch.constant.toTypedArray()], [1, 2, 3]);
    steps++;
  }
  assert.equal(steps, 4);
  assert.equal(constant.disposed, false);
});

Deno.test("an iterator whose next() gives no object fails that iteration with TypeError, after the batches before it", async () => {
  // `for await` throws TypeError here too; the loop must neither end early
  // as if the source were exhausted nor leave an unhandled rejection.
  const source = {
    [Symbol.iterator]() {
      let i = 0;
      return {
        next: () => (i++ === 0 ? { value: { ids: new Int32Array([7]) }, done: false } : undefined),
      };
    },
  } as unknown as Iterable<{ ids: Int32Array }>;
  const seen: number[] = [];
  await assert.rejects(
    async () => {
      for await (const batch of prefetch(source, "cpu")) {
        seen.push(batch.ids.toTypedArray()[0] as number);
      }
    },
    { name: "TypeError", message: /next\(\) gave undefined, expected an object/ },
  );
  assert.deepEqual(seen, [7]);
});

Deno.test("an iterator result whose done getter throws fails that iteration with the getter's error", async () => {
  const source = {
    [Symbol.iterator]() {
      return {
        next: () => ({
          get done(): boolean {
            throw new Error("done getter failed");
          },
          value: undefined,
        }),
      };
    },
  } as unknown as Iterable<{ ids: Int32Array }>;
  await assert.rejects(async () => {
    for await (const _ of prefetch(source, "cpu")) { /* no batch */ }
  }, /done getter failed/);
});

Deno.test("a sync source of promises of batches: each promise is awaited and its batch copied, as for await does", async () => {
  const source = [0, 1, 2].map((i) => Promise.resolve({ ids: new Int32Array([i]) }));
  const seen: number[] = [];
  for await (const batch of prefetch(source, "cpu")) {
    assert.ok(batch.ids instanceof Tensor, "the batch was not copied");
    seen.push(batch.ids.toTypedArray()[0] as number);
  }
  assert.deepEqual(seen, [0, 1, 2]);
});

Deno.test("a sync source's rejected promise fails its iteration and closes the source", async () => {
  let closed = false;
  const source = {
    [Symbol.iterator]() {
      let i = 0;
      return {
        next: () => ({
          value: i++ === 0 ? Promise.resolve({ ids: new Int32Array(1) }) : Promise.reject(
            new Error("load failed"),
          ),
          done: false,
        }),
        return: () => {
          closed = true;
          return { value: undefined, done: true as const };
        },
      };
    },
  } as Iterable<Promise<{ ids: Int32Array }>>;
  let steps = 0;
  await assert.rejects(async () => {
    for await (const _ of prefetch(source, "cpu", { depth: 1 })) steps++;
  }, /load failed/);
  assert.equal(steps, 1);
  assert.equal(closed, true);
});

Deno.test("a source whose return() never settles: the copies in flight and the last result are disposed all the same", async () => {
  const pool = addressPool();
  const inputs = Array.from({ length: 6 }, () => pooledTensor(pool, -1));
  let i = 0;
  const source: AsyncIterable<{ t: Tensor }> = {
    [Symbol.asyncIterator]: () => ({
      next: () => Promise.resolve({ value: { t: inputs[i++ % inputs.length] }, done: false }),
      return: () => new Promise<IteratorResult<{ t: Tensor }>>(() => {}),
    }),
  };
  const loop = prefetch(source, "cpu", { depth: 3, disposePrevious: true });
  const first = await loop.next();
  assert.equal(first.done, false);
  // Leaving hangs on the source's return(), as `for await` would; what the
  // loop made must not hang with it.
  void loop.return(undefined);
  for (const input of inputs) input.dispose();
  for (let turn = 0; turn < 50 && pool.stats().inUseBytes > 0; turn++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  assert.equal((first.value as { t: Tensor }).t.disposed, true, "the last result was kept");
  assert.equal(pool.stats().inUseBytes, 0, "a result of a copy in flight kept its block");
});

Deno.test("a prefetch that is never iterated never opens its source", async () => {
  let opened = 0;
  const source = {
    [Symbol.iterator]() {
      opened++;
      return [{ ids: new Int32Array(1) }][Symbol.iterator]();
    },
  };
  const loop = prefetch(source, "cpu");
  await loop.return(undefined); // an async generator not started runs no finally
  assert.equal(opened, 0);
  for await (const _ of prefetch(source, "cpu")) { /* one batch */ }
  assert.equal(opened, 1);
});

Deno.test("prefetch() rejects a bad after at once, not at the first step", () => {
  let opened = false;
  const source = {
    *[Symbol.iterator]() {
      opened = true;
      yield { ids: new Int32Array(1) };
    },
  };
  for (const after of [5, [{}], new Array(1)]) {
    assert.throws(() => prefetch(source, "cpu", { after: after as never }), {
      name: "TypeError",
      message: /^Invalid option after/,
    });
  }
  assert.equal(opened, false);
});

Deno.test("a source that recycles a ring of depth + 1 arenas sees every batch intact on the CPU target, sync or async", async () => {
  // On "cpu" a result is its batch's memory: one arena reset for every
  // batch read 2,3,3,3 for batches 0..3 (pulled ahead while in use); a
  // ring of depth arenas tears too (this test then fails).
  for (const depth of [1, 2, 3]) {
    const ring = Array.from({ length: depth + 1 }, () => hostArena(256));
    const build = (step: number) => {
      const arena = ring[step % ring.length];
      arena.reset();
      return { step: arena.int32(4).fill(step) };
    };
    const syncLoader = function* () {
      for (let step = 0; step < 3 * ring.length; step++) yield build(step);
    };
    const asyncLoader = async function* () {
      for (let step = 0; step < 3 * ring.length; step++) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        yield build(step);
      }
    };
    for (const loader of [syncLoader, asyncLoader]) {
      const seen: number[] = [];
      for await (const batch of prefetch(loader(), "cpu", { depth })) {
        // The loop body takes a while: the pump fills the queue meanwhile.
        for (let turn = 0; turn < 3; turn++) await new Promise((r) => setTimeout(r, 0));
        const values = [...batch.step.toTypedArray()] as number[];
        assert.ok(values.every((v) => v === values[0]), `torn batch ${values}`);
        seen.push(values[0]);
      }
      const expected = Array.from({ length: 3 * ring.length }, (_, i) => i);
      assert.deepEqual(seen, expected, `${loader.name}, depth ${depth}`);
    }
    for (const arena of ring) arena.dispose();
  }
});

Deno.test("prefetch() reads its own options only: depth or disposePrevious on Object.prototype changes nothing", async () => {
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.depth = 0;
  prototype.disposePrevious = true;
  try {
    // Was: RangeError "Invalid prefetch depth 0" for every prefetch.
    const kept: Tensor[] = [];
    for await (const batch of prefetch(batches(3), "cpu", {})) kept.push(batch.ids);
    assert.ok(kept.every((t) => !t.disposed), "results disposed by an inherited disposePrevious");
  } finally {
    delete prototype.depth;
    delete prototype.disposePrevious;
  }
});
