// Bytes in front of a tensor's data that ckpt's own allocator (tfjs `snapshot`) left free for the
// tensor's record prefix. In a page the binary encoder writes the prefix there, so the record
// (prefix, then body) lies whole in memory and one WebCrypto call hashes it, with no copy of the
// body; a tensor without such room keeps the incremental hash.

const reserved = new WeakMap<ArrayBufferLike, Map<number, number>>();

/**
 * Marks the `bytes` before `view` in its buffer as free for an encoder to write into (they
 * belong to no tensor and to no caller).
 *
 * @example
 * ```ts
 * import { headroomOf, reserveHeadroom } from "./_headroom.ts";
 * import assert from "node:assert/strict";
 * const data = new Float32Array(new ArrayBuffer(1024), 128, 16);
 * assert.equal(headroomOf(data), 0);
 * reserveHeadroom(data, 128);
 * assert.equal(headroomOf(new Uint8Array(data.buffer, 128, 64)), 128);
 * ```
 */
export function reserveHeadroom(view: ArrayBufferView, bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > view.byteOffset) {
    throw new RangeError(`Cannot reserve ${bytes} bytes before a view at byte ${view.byteOffset}`);
  }
  let at = reserved.get(view.buffer);
  if (!at) reserved.set(view.buffer, at = new Map());
  at.set(view.byteOffset, bytes);
}

/** The bytes before `view` reserved with {@linkcode reserveHeadroom} (by where the view starts); 0 when none. */
export function headroomOf(view: ArrayBufferView): number {
  return reserved.get(view.buffer)?.get(view.byteOffset) ?? 0;
}
