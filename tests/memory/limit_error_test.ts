import assert from "node:assert/strict";
import { MemoryLimitError } from "../../mod.ts";

Deno.test("MemoryLimitError says what did not fit, against which limit, and what to do", () => {
  const never = new MemoryLimitError({
    memory: "cuda:0",
    neededBytes: 8192,
    limitBytes: 4096,
    inUseBytes: 0,
    variable: "MTC_DEVICE_LIMIT",
  });
  assert.ok(never instanceof Error);
  assert.equal(never.name, "MemoryLimitError");
  assert.equal(never.waitedMs, undefined);
  assert.match(
    never.message,
    /^Cannot start the copy: it needs about 8192 bytes of cuda:0 memory, more than the memory limit of 4096 bytes; raise the limit \(MTC_DEVICE_LIMIT or setMemoryLimits\)/,
  );
  const waited = new MemoryLimitError({
    memory: "pinned",
    neededBytes: 100,
    limitBytes: 200,
    inUseBytes: 150,
    waitedMs: 50,
    variable: "MTC_PINNED_LIMIT",
  });
  assert.deepEqual(
    [waited.memory, waited.neededBytes, waited.limitBytes, waited.inUseBytes, waited.waitedMs],
    ["pinned", 100, 200, 150, 50],
  );
  assert.match(
    waited.message,
    /waited 50 ms for 100 bytes of pinned memory .* 150 bytes are in use/,
  );
  assert.match(waited.message, /Dispose results you no longer need/);
});

Deno.test("new MemoryLimitError() without an options object throws TypeError naming them", () => {
  const Construct = MemoryLimitError as unknown as new (options?: unknown) => Error;
  for (const options of [undefined, null, 5]) {
    // Was "Cannot destructure property 'memory' of 'options' as it is undefined."
    assert.throws(() => new Construct(options), {
      name: "TypeError",
      message: /^Invalid MemoryLimitError options: expected an object/,
    });
  }
});
