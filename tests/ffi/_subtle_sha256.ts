/** For tests: SHA-256 by `crypto.subtle`, an oracle independent of `ffi/sha256.ts`. */

/** The lowercase hex SHA-256 of `bytes`. */
export async function subtleSha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
  );
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}
