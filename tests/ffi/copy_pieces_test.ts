import assert from "node:assert/strict";
import { copyPieces, viewAddress } from "../../ffi/native.ts";

const native = new URL("../../native/", import.meta.url).pathname;

/** Builds native/test_copy_pieces_threads.c with copy_pieces.c under ThreadSanitizer; undefined where cc cannot. */
async function threadSanitizedBuild(dir: string): Promise<string | undefined> {
  const out = `${dir}/copy_pieces_threads`;
  try {
    const { success } = await new Deno.Command("cc", {
      args: [
        "-std=c11",
        "-O1",
        "-g",
        "-fsanitize=thread",
        `-I${native}`,
        '-DMTC_SOURCE_HASH="test"',
        `${native}copy_pieces.c`,
        `${native}test_copy_pieces_threads.c`,
        "-o",
        out,
        "-lpthread",
      ],
      stdout: "null",
      stderr: "null",
    }).output();
    return success ? out : undefined;
  } catch {
    return undefined; // no cc
  }
}

const buildDir = await Deno.makeTempDir();
const sanitized = await threadSanitizedBuild(buildDir);
addEventListener("unload", () => Deno.removeSync(buildDir, { recursive: true }));

/** `count` random pieces of 1 to `maxBytes` bytes, and a table that copies them back to back into `dst`. */
function piecesInto(dst: Uint8Array, count: number, maxBytes: number) {
  const sources: Uint8Array[] = [];
  const table = new Float64Array(3 * count);
  let offset = 0;
  for (let i = 0; i < count; i++) {
    const bytes = 1 + Math.floor(Math.random() * maxBytes);
    const src = crypto.getRandomValues(new Uint8Array(bytes));
    sources.push(src);
    table.set([viewAddress(src), viewAddress(dst) + offset, bytes], 3 * i);
    offset += bytes;
  }
  return { sources, table, bytes: offset };
}

function assertPiecesLanded(dst: Uint8Array, sources: Uint8Array[]): void {
  let offset = 0;
  for (const [i, src] of sources.entries()) {
    assert.deepEqual(dst.subarray(offset, offset + src.length), src, `piece ${i}`);
    offset += src.length;
  }
}

Deno.test("copyPieces copies every piece byte for byte with several threads", () => {
  const dst = new Uint8Array(4 << 20);
  const { sources, table } = piecesInto(dst, 1000, 4096);
  copyPieces(table, sources.length, 8);
  assertPiecesLanded(dst, sources);
});

Deno.test("copyPieces copies on the calling thread alone when asked for one thread", () => {
  const dst = new Uint8Array(1 << 20);
  const { sources, table } = piecesInto(dst, 100, 1000);
  copyPieces(table, sources.length, 1);
  assertPiecesLanded(dst, sources);
});

Deno.test("copyPieces does the next job right after the last (helpers from earlier jobs are reused)", () => {
  for (let round = 0; round < 50; round++) {
    const dst = new Uint8Array(256 << 10);
    const { sources, table } = piecesInto(dst, 1 + round * 7, 512);
    copyPieces(table, sources.length, 1 + (round % 16));
    assertPiecesLanded(dst, sources);
  }
});

Deno.test("copyPieces lands every piece of every job, with new bytes each time and any thread count", async () => {
  const count = 1000;
  const sources = Array.from({ length: count }, () => new Float32Array(1024));
  const dst = new Float32Array(count * 1024);
  const table = new Float64Array(3 * count);
  sources.forEach((src, k) =>
    table.set([viewAddress(src), viewAddress(dst) + 4096 * k, 4096], 3 * k)
  );
  for (let job = 1; job <= 300; job++) {
    for (const src of sources) src[0] = src[1023] = job;
    copyPieces(table, count, 1 + (job % 16));
    for (let k = 0; k < count; k++) {
      if (dst[1024 * k] !== job || dst[1024 * k + 1023] !== job) {
        assert.fail(`job ${job}: piece ${k} holds ${dst[1024 * k]}, ${dst[1024 * k + 1023]}`);
      }
    }
    // Now and then the helpers go back to sleep between jobs.
    if (job % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  }
});

Deno.test("a process whose copies used helper threads exits cleanly (the shim is never unloaded under them)", async () => {
  // Unloading the shim at exit while helpers slept in it crashed 2 runs in 5 (SIGSEGV).
  const script = `import { viewAddress, copyPieces } from ${
    JSON.stringify(new URL("../../ffi/native.ts", import.meta.url).href)
  };
const src = new Uint8Array(1 << 20), dst = new Uint8Array(1 << 20), table = new Float64Array(3 * 256);
for (let k = 0; k < 256; k++) table.set([viewAddress(src) + 4096 * k, viewAddress(dst) + 4096 * k, 4096], 3 * k);
for (let i = 0; i < 200; i++) copyPieces(table, 256, 16);`;
  const file = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, script);
    for (let run = 0; run < 8; run++) {
      const { code, signal, stderr } = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--no-check", "--allow-ffi", "--allow-read", "--allow-env", file],
        stderr: "piped",
        stdout: "null",
      }).output();
      assert.equal(signal, null, new TextDecoder().decode(stderr));
      assert.equal(code, 0, new TextDecoder().decode(stderr));
    }
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("copyPieces of no pieces does nothing: no error, and no entry of the table is copied", () => {
  assert.equal(copyPieces(new Float64Array(0), 0, 4), undefined);
  // A table that holds a piece, with a count of none: the piece stays where it is.
  const src = new Uint8Array(64).fill(1);
  const dst = new Uint8Array(64).fill(7);
  const table = new Float64Array([viewAddress(src), viewAddress(dst), 64]);
  assert.equal(copyPieces(table, 0, 4), undefined);
  assert.deepEqual(dst, new Uint8Array(64).fill(7));
  // The same table with its count copies (so the table above was a real piece).
  copyPieces(table, 1, 4);
  assert.deepEqual(dst, src);
});

Deno.test("viewAddress gives a view's first byte, and 0 for a detached or empty view", () => {
  const buffer = new ArrayBuffer(64);
  const whole = new Uint8Array(buffer);
  assert.equal(viewAddress(new Uint8Array(buffer, 16, 8)), viewAddress(whole) + 16);
  assert.equal(viewAddress(new Uint8Array(0)), 0);
  buffer.transfer();
  assert.equal(viewAddress(whole), 0);
});

Deno.test({
  name:
    "the helper threads share no memory unsynchronized with the caller: 3000 random jobs under ThreadSanitizer (needs cc with -fsanitize=thread)",
  ignore: sanitized === undefined,
  async fn() {
    const { code, stdout, stderr } = await new Deno.Command(sanitized!, {
      env: { TSAN_OPTIONS: "halt_on_error=1 exitcode=66" },
    }).output();
    const report = new TextDecoder().decode(stderr);
    assert.equal(code, 0, report);
    assert.doesNotMatch(report, /ThreadSanitizer/);
    assert.match(new TextDecoder().decode(stdout), /3000 jobs: every piece landed/);
  },
});
