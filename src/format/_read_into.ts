// Restoring into buffers the caller already has (`loadCheckpoint`'s `into`): the buffer given for
// a tensor, checked against what the checkpoint says of it, as the bytes a decoder reads its body
// into. A load into fresh memory spends about half its CPU time in the kernel zeroing the pages
// the tensors land in (docs/performance.md, "Where ckpt's time goes"); a model's own buffers were
// touched long ago.

import { typedArrayFrom } from "./dtype.ts";
import type { Tensor } from "./types.ts";

/** Buffers to read tensors into, by tensor name (`loadCheckpoint`'s `into`). */
export type IntoBuffers = ReadonlyMap<string, ArrayBufferView>;

/**
 * `into` checked as an option: a `Map` from tensor names to typed arrays (or DataViews), each
 * over a plain `ArrayBuffer` (not detached), no two sharing a byte; anything else is a
 * `TypeError` naming the entry.
 *
 * @example
 * ```ts
 * import { checkInto } from "./_read_into.ts";
 * import assert from "node:assert/strict";
 * checkInto(new Map([["w", new Float32Array(2)]]));
 * assert.throws(() => checkInto({ w: new Float32Array(2) }), TypeError);
 * const one = new Float32Array(4);
 * checkInto(new Map([["a", one.subarray(0, 2)], ["b", one.subarray(2)]])); // side by side
 * assert.throws(() => checkInto(new Map([["a", one], ["b", one.subarray(3)]])), /share memory/);
 * ```
 */
export function checkInto(into: unknown): asserts into is IntoBuffers {
  if (!(into instanceof Map)) {
    throw new TypeError("Invalid into option: expected a Map from tensor names to typed arrays");
  }
  for (const [name, view] of into) {
    const where = `Invalid into option: the entry ${JSON.stringify(String(name))}`;
    if (typeof name !== "string") throw new TypeError(`${where} is not named by a string`);
    if (!ArrayBuffer.isView(view)) throw new TypeError(`${where} is not a typed array or DataView`);
    if (!(view.buffer instanceof ArrayBuffer)) throw new TypeError(`${where} is not over a plain ArrayBuffer`);
    if ((view.buffer as { detached?: boolean }).detached === true) {
      throw new TypeError(`${where} is over a detached ArrayBuffer`);
    }
  }
  // Two tensors read into the same bytes would overwrite each other: per buffer, sorted by
  // offset, each view must end where or before the next begins.
  const byBuffer = new Map<ArrayBufferLike, { name: string; start: number; end: number }[]>();
  for (const [name, v] of into as IntoBuffers) {
    if (v.byteLength === 0) continue;
    const spans = byBuffer.get(v.buffer) ?? [];
    spans.push({ name, start: v.byteOffset, end: v.byteOffset + v.byteLength });
    byBuffer.set(v.buffer, spans);
  }
  for (const spans of byBuffer.values()) {
    spans.sort((x, y) => x.start - y.start);
    for (let k = 1; k < spans.length; k++) {
      const [a, b] = [spans[k - 1]!, spans[k]!];
      if (b.start < a.end) {
        throw new TypeError(
          `Invalid into option: the entries ${JSON.stringify(a.name)} and ${JSON.stringify(b.name)} share memory`,
        );
      }
    }
  }
}

/**
 * The bytes of the buffer `into` gives for tensor `name` (undefined where it gives none), once
 * its size is the tensor's: a `RangeError` naming the tensor and both sizes otherwise.
 *
 * @example
 * ```ts
 * import { intoBytes } from "./_read_into.ts";
 * import assert from "node:assert/strict";
 * const kernel = new Float32Array(4);
 * const into = new Map([["kernel", kernel]]);
 * assert.equal(intoBytes(into, "kernel", 16)!.buffer, kernel.buffer);
 * assert.equal(intoBytes(into, "bias", 8), undefined);
 * assert.throws(() => intoBytes(into, "kernel", 32), RangeError);
 * ```
 */
export function intoBytes(into: IntoBuffers | undefined, name: string, byteLength: number): Uint8Array | undefined {
  const view = into?.get(name);
  if (view === undefined) return undefined;
  if (view.byteLength !== byteLength) {
    throw new RangeError(
      `Cannot load checkpoint into the given buffers: tensor ${JSON.stringify(name)} has ${byteLength} bytes, ` +
        `the buffer given for it ${view.byteLength}`,
    );
  }
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/**
 * `tensors` with each one that `into` names in the buffer given for it: its bytes copied there
 * unless a decoder already read them there, its `data` then a view of that memory (of the
 * tensor's dtype). A name in `into` that no tensor has is a `RangeError`.
 *
 * @example
 * ```ts
 * import { placeInto } from "./_read_into.ts";
 * import type { Tensor } from "./types.ts";
 * import assert from "node:assert/strict";
 * const mine = new Float32Array(2);
 * const loaded: Tensor[] = [{ name: "w", dtype: "float32", shape: [2], group: "params", data: new Float32Array([1, 2]) }];
 * const [w] = placeInto(loaded, new Map([["w", mine]]));
 * assert.equal(w!.data.buffer, mine.buffer);
 * assert.deepEqual(mine, new Float32Array([1, 2]));
 * ```
 */
export function placeInto(tensors: Tensor[], into: IntoBuffers | undefined): Tensor[] {
  if (!into) return tensors;
  const names = new Set(tensors.map((t) => t.name));
  const missing = [...into.keys()].filter((n) => !names.has(n));
  if (missing.length) {
    throw new RangeError(
      `Cannot load checkpoint into the given buffers: no tensor named ${
        missing.map((n) => JSON.stringify(n)).join(", ")
      } among those loaded`,
    );
  }
  return tensors.map((t) => {
    const target = intoBytes(into, t.name, t.data.byteLength);
    if (!target) return t;
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    if (bytes.buffer !== target.buffer || bytes.byteOffset !== target.byteOffset) target.set(bytes);
    return { ...t, data: typedArrayFrom(t.dtype, target) };
  });
}
