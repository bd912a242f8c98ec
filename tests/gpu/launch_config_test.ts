import assert from "node:assert/strict";
import { checkConfigKeys, own, writeLaunchHeader } from "../../src/gpu/launch_config.ts";
import type { LaunchConfig } from "../../src/gpu/launch_config.ts";

// The launch configuration's checks and the header they write, without a
// GPU (the same checks through Kernel.launch: tests/gpu/kernel_test.ts).

const limits = { maxThreads: 256, maxSharedBytes: 1024 };

function header(config: Partial<LaunchConfig>): number[] {
  const into = new Uint32Array(8);
  writeLaunchHeader({ grid: 1, block: 1, args: [], ...config }, into, limits, 'kernel "k"');
  return [...into];
}

Deno.test("writeLaunchHeader: grid, block and shared bytes go to the header's first seven words, missing dimensions as 1", () => {
  assert.deepEqual(header({ grid: [4, 3], block: 32, sharedBytes: 512 }), [
    4,
    3,
    1,
    32,
    1,
    1,
    512,
    0,
  ]);
  assert.deepEqual(header({ grid: 2, block: [8, 4, 2] }), [2, 1, 1, 8, 4, 2, 0, 0]);
});

Deno.test("writeLaunchHeader: more threads per block than the kernel allows is a RangeError naming the kernel", () => {
  assert.throws(() => header({ block: [16, 16, 2] }), {
    name: "RangeError",
    message: 'Invalid block: expected at most 256 threads per block for kernel "k", got 512',
  });
  header({ block: [16, 16, 1] }); // exactly the limit
});

Deno.test("writeLaunchHeader: shared bytes past the kernel's limit, or not an integer, are a RangeError", () => {
  for (const sharedBytes of [1025, -1, 1.5]) {
    assert.throws(() => header({ sharedBytes }), {
      name: "RangeError",
      message: new RegExp(
        `^Invalid sharedBytes: expected an integer from 0 to 1024 .*got ${sharedBytes}$`,
      ),
    });
  }
  assert.equal(header({ sharedBytes: 1024 })[6], 1024);
});

Deno.test("writeLaunchHeader: dimensions past the device limits name the dimension", () => {
  assert.throws(() => header({ grid: [1, 65536] }), {
    name: "RangeError",
    message: "Invalid grid[1]: expected an integer from 1 to 65535, got 65536",
  });
  assert.throws(() => header({ block: [1, 1, 65] }), {
    name: "RangeError",
    message: "Invalid block[2]: expected an integer from 1 to 64, got 65",
  });
  assert.throws(() => header({ grid: 0 }), {
    name: "RangeError",
    message: "Invalid grid: expected an integer from 1 to 2147483647, got 0",
  });
  assert.throws(() => header({ grid: [] as unknown as [number] }), {
    name: "TypeError",
    message: "Invalid grid: expected a number or [x, y?, z?], got Array",
  });
});

Deno.test("checkConfigKeys: an object with the options' keys only; anything else is a TypeError", () => {
  checkConfigKeys({
    grid: 1,
    block: 1,
    args: [],
    sharedBytes: 0,
    stream: undefined,
    after: undefined,
  });
  assert.throws(() => checkConfigKeys(null), {
    name: "TypeError",
    message: "Invalid config: expected an object, got null",
  });
  assert.throws(() => checkConfigKeys({ grid: 1, block: 1, args: [], blocks: 2 }), {
    name: "TypeError",
    message:
      'Invalid config option "blocks": expected one of grid, block, sharedBytes, args, stream, after',
  });
});

Deno.test("own: an inherited option is no option", () => {
  const config = Object.create({ sharedBytes: 64 }) as LaunchConfig;
  assert.equal(own(config, "sharedBytes"), undefined);
  assert.equal(header(config)[6], 0);
  assert.equal(own({ grid: 1, block: 1, args: [], sharedBytes: 8 }, "sharedBytes"), 8);
});
