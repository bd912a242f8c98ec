import assert from "node:assert/strict";
import { sha256HexSync } from "../../ffi/sha256.ts";
import { subtleSha256Hex as sha256Hex } from "./_subtle_sha256.ts";

Deno.test("sha256HexSync() gives the FIPS 180-4 test vectors", () => {
  const text = (s: string) => new TextEncoder().encode(s);
  assert.equal(
    sha256HexSync(text("")),
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  );
  assert.equal(
    sha256HexSync(text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
  );
});

Deno.test("sha256HexSync() agrees with crypto.subtle at every length around the block edges and on the shim", async () => {
  let seed = 7;
  const lengths = [...Array.from({ length: 200 }, (_, i) => i), 1000, 4095, 65536, 100_003];
  for (const length of lengths) {
    const bytes = Uint8Array.from(
      { length },
      () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24,
    );
    assert.equal(sha256HexSync(bytes), await sha256Hex(bytes), `length ${length}`);
  }
  const shim = await Deno.readFile(
    new URL("../../native/prebuilt/linux-x86_64/libmtc.so", import.meta.url),
  );
  assert.equal(sha256HexSync(shim), await sha256Hex(shim));
});
