// Checks every backend applies the same way: what a key may be, what a list prefix may be, and
// how a requested byte range maps onto an object of a known size.

import type { ByteRange } from "./types.ts";

/** Why `key` is not a valid object key, or `undefined` when it is. */
function keyProblem(key: unknown, prefix: boolean, backslash = false): string | undefined {
  if (typeof key !== "string") return "it is not a string";
  if (key === "") return prefix ? undefined : "it is empty";
  if (key.startsWith("/")) return "it starts with /";
  if (!backslash && key.includes("\\")) return "it holds a backslash";
  if (key.includes("\0")) return "it holds a NUL character";
  const segments = key.split("/");
  // A prefix may end with "/" (a "directory") or in the middle of a name.
  const whole = prefix ? segments.slice(0, -1) : segments;
  if (whole.some((s) => s === "")) return "it has an empty segment";
  if (segments.some((s) => s === "." || s === "..")) return "it has a . or .. segment";
  return undefined;
}

/**
 * Throws a `TypeError` unless `key` is a valid object key: a non-empty `/`-separated string,
 * not starting with `/`, with no empty, `.` or `..` segment, no NUL, and no backslash unless
 * `backslash` (a POSIX file name may hold one).
 */
export function checkKey(key: unknown, store: string, backslash = false): asserts key is string {
  const why = keyProblem(key, false, backslash);
  if (why !== undefined) throw new TypeError(`Invalid object key ${JSON.stringify(key)} for ${store}: ${why}`);
}

/** Throws a `TypeError` unless `prefix` is empty or could start a valid key. */
export function checkPrefix(prefix: unknown, store: string): asserts prefix is string {
  const why = keyProblem(prefix, true);
  if (why !== undefined) throw new TypeError(`Invalid list prefix ${JSON.stringify(prefix)} for ${store}: ${why}`);
}

function checkCount(value: unknown, what: string): void {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`Invalid byte range: ${what} must be a non-negative safe integer, got ${String(value)}`);
  }
}

/** Throws a `RangeError` unless `range` is a well-formed {@linkcode ByteRange}. */
export function checkRange(range: ByteRange | undefined): void {
  if (range === undefined) return;
  if (range === null || typeof range !== "object") throw new TypeError("Invalid byte range: not an object");
  if ("suffix" in range) return checkCount(range.suffix, "suffix");
  checkCount(range.offset, "offset");
  if (range.length !== undefined) checkCount(range.length, "length");
}

/** The part of an object of `size` bytes that `range` selects, clipped to the object. */
export function clipRange(range: ByteRange | undefined, size: number): { offset: number; length: number } {
  if (range === undefined) return { offset: 0, length: size };
  if ("suffix" in range) {
    const length = Math.min(range.suffix, size);
    return { offset: size - length, length };
  }
  const offset = Math.min(range.offset, size);
  const length = Math.min(range.length ?? size - offset, size - offset);
  return { offset, length };
}
