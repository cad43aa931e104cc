/**
 * The error a caller is expected to catch: stored and computed digests differ.
 * Malformed input raises built-in classes instead (`SyntaxError` for bad bytes, `RangeError`
 * for a size over a limit, `TypeError` for a bad argument).
 *
 * @module
 */

/**
 * Thrown when bytes do not match their SHA-256: a tensor, the metadata, the whole stream, or an
 * expected digest given by the caller. Nothing decoded before the mismatch is returned as whole.
 *
 * @example
 * ```ts
 * import { ChecksumMismatchError } from "./errors.ts";
 * import assert from "node:assert/strict";
 * const e = new ChecksumMismatchError("tensor \"w\"", "00ff", "ff00");
 * assert.equal(e.expected, "00ff");
 * assert.equal(e.actual, "ff00");
 * assert.match(e.message, /tensor "w"/);
 * ```
 */
export class ChecksumMismatchError extends Error {
  /** The digest the bytes should have, in lowercase hex. */
  readonly expected: string;
  /** The digest the bytes have, in lowercase hex. */
  readonly actual: string;
  /** What was checked, such as `tensor "dense/kernel"` or `stream`. */
  readonly subject: string;

  /**
   * Builds the error and its message from what was checked and the two digests.
   *
   * @param subject What was checked, such as `tensor "dense/kernel"`.
   * @param expected The stored digest, hex.
   * @param actual The computed digest, hex.
   * @param where Optional position, such as `at offset 4096`.
   */
  constructor(subject: string, expected: string, actual: string, where?: string) {
    super(
      `Checksum mismatch for ${subject}${where ? ` ${where}` : ""}: expected sha256 ${expected}, got ${actual}`,
    );
    this.name = "ChecksumMismatchError";
    this.subject = subject;
    this.expected = expected;
    this.actual = actual;
  }
}
