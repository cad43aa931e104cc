// Byte-grouped tensor bodies (binary format, docs/FORMAT.md "Byte-grouped bodies"): a float
// tensor's elements split into byte planes (plane k holds byte k of every element, little-endian),
// each plane stored as is or raw-deflated, whichever is smaller. The plane holding sign and
// exponent compresses well on trained weights, mantissa planes rarely do (ZipNN, arXiv 2411.05239).

import type { DType } from "../types.ts";
import { type DeflateBackend, inflateRaw } from "../_deflate.ts";
import { LiteralsInflater } from "../_inflate_literals.ts";
import {
  deflateBound,
  LITERALS_BLOCK_BYTES,
  type LiteralsPlan,
  planLiterals,
  writeLiterals,
} from "../_deflate_literals.ts";

/** The `encoding` value of a byte-grouped tensor record. */
export const BYTEGROUP_ENCODING = "bytegroup";
/** Version byte of the byte-grouped body layout. */
export const BYTEGROUP_VERSION = 1;
/** Plane methods. */
export const PLANE_STORED = 0;
/** A plane compressed with raw deflate (RFC 1951). */
export const PLANE_DEFLATE = 1;
/** Bytes before the plane table: version, plane count, six zero bytes. */
export const BYTEGROUP_HEADER_BYTES = 8;
/** Bytes of one plane table entry: method, seven zero bytes, stored length (u64). */
export const PLANE_ENTRY_BYTES = 16;

/** Planes up to twice this long are judged whole; longer ones by a sample of this size. */
const SAMPLE_BYTES = 64 * 1024;
/** A plane whose sample would Huffman-code to at least this fraction of its size is stored as is. */
const SAMPLE_PAYS = 0.97;

/** Element widths of the dtypes that are byte-grouped; other dtypes stay raw. */
const FLOAT_WIDTH: Partial<Record<DType, number>> = { float16: 2, bfloat16: 2, float32: 4, float64: 8 };

/** Whether tensors of this dtype are byte-grouped (floats; integers and bool stay raw). */
export function isByteGroupable(dtype: DType): boolean {
  return FLOAT_WIDTH[dtype] !== undefined;
}

/**
 * Splits `bytes` (elements of `width` bytes) into `width` planes of one byte per element. Plane k
 * goes into `alloc(k, n)`, a 4-byte aligned buffer of n ≥ count bytes (n rounded up to a multiple
 * of 4), so the inner loops store whole words.
 */
export function splitPlanes(
  bytes: Uint8Array,
  width: number,
  alloc: (k: number, n: number) => Uint8Array = (_, n) => new Uint8Array(n),
): Uint8Array[] {
  const count = bytes.byteLength / width;
  const stride = (count + 3) & ~3;
  const planes = Array.from({ length: width }, (_, k) => alloc(k, stride).subarray(0, count));
  if (bytes.byteOffset % 4 !== 0) bytes = bytes.slice();
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2);
  const quads = count >>> 2; // groups of 4 elements: each gives one word per plane
  const out = planes.map((p) => new Uint32Array(p.buffer, p.byteOffset, quads));
  if (width === 2) split2(words, out[0]!, out[1]!, quads);
  else if (width === 4) split4(words, 0, 1, out[0]!, out[1]!, out[2]!, out[3]!, quads);
  else {
    // float64: planes 0-3 from each element's low word, 4-7 from its high word.
    split4(words, 0, 2, out[0]!, out[1]!, out[2]!, out[3]!, quads);
    split4(words, 1, 2, out[4]!, out[5]!, out[6]!, out[7]!, quads);
  }
  // The last count % 4 elements, byte by byte.
  for (let i = quads * 4; i < count; i++) {
    for (let k = 0; k < width; k++) planes[k]![i] = bytes[i * width + k]!;
  }
  return planes;
}

/** 2-byte elements, two per word in: each 2 words in give 1 word per plane out. */
function split2(w: Uint32Array, o0: Uint32Array, o1: Uint32Array, quads: number): void {
  for (let q = 0, j = 0; q < quads; q++, j += 2) {
    const a = w[j]!;
    const b = w[j + 1]!;
    // The inverse of join2's two steps: elements 0 and 2 in one word, 1 and 3 in the other, then
    // their bytes to the planes.
    const even = (a & 0xffff) | (b << 16);
    const odd = (a >>> 16) | (b & 0xffff0000);
    o0[q] = (even & 0x00ff00ff) | ((odd & 0x00ff00ff) << 8);
    o1[q] = ((even >>> 8) & 0x00ff00ff) | (odd & 0xff00ff00);
  }
}

/**
 * Words `from`, `from + step`, … (one per element: the element itself, or one half of a float64
 * when `step` is 2), 4 at a time, transposed into one word of each of 4 planes.
 */
function split4(
  w: Uint32Array,
  from: number,
  step: number,
  o0: Uint32Array,
  o1: Uint32Array,
  o2: Uint32Array,
  o3: Uint32Array,
  quads: number,
): void {
  for (let q = 0, j = from; q < quads; q++, j += 4 * step) {
    const a = w[j]!;
    const b = w[j + step]!;
    const c = w[j + 2 * step]!;
    const d = w[j + 3 * step]!;
    // A 4×4 byte transpose in two steps: bytes of a and b paired (b2 a2 b0 a0, b3 a3 b1 a1),
    // and of c and d, then pairs of pairs (28 operations against 34 byte by byte: 10% faster).
    const ab02 = (a & 0x00ff00ff) | ((b & 0x00ff00ff) << 8);
    const ab13 = ((a >>> 8) & 0x00ff00ff) | (b & 0xff00ff00);
    const cd02 = (c & 0x00ff00ff) | ((d & 0x00ff00ff) << 8);
    const cd13 = ((c >>> 8) & 0x00ff00ff) | (d & 0xff00ff00);
    o0[q] = (ab02 & 0xffff) | (cd02 << 16);
    o1[q] = (ab13 & 0xffff) | (cd13 << 16);
    o2[q] = (ab02 >>> 16) | (cd02 & 0xffff0000);
    o3[q] = (ab13 >>> 16) | (cd13 & 0xffff0000);
  }
}

/**
 * Interleaves `width` planes back into elements: the inverse of {@linkcode splitPlanes}. The
 * result goes into `alloc(n)` (a buffer of exactly `n` bytes, 4-byte aligned).
 */
export function joinPlanes(
  planes: readonly Uint8Array[],
  width: number,
  alloc: (n: number) => Uint8Array = (n) => new Uint8Array(n),
): Uint8Array {
  const count = planes[0]!.byteLength;
  const out = alloc(count * width);
  if (out.byteLength !== count * width || out.byteOffset % 4 !== 0) {
    throw new RangeError(`joinPlanes: alloc gave ${out.byteLength} bytes at offset ${out.byteOffset}`);
  }
  const words = new Uint32Array(out.buffer, out.byteOffset, out.byteLength >>> 2);
  const quads = count >>> 2;
  // Word views of the planes (an unaligned plane is copied to an aligned one first).
  const view = (p: Uint8Array) =>
    p.byteOffset % 4 === 0
      ? new Uint32Array(p.buffer, p.byteOffset, quads)
      : new Uint32Array(p.slice().buffer, 0, quads);
  if (quads > 0) {
    if (width === 2) join2(words, view(planes[0]!), view(planes[1]!), quads);
    else {
      const step = width / 4;
      for (let half = 0; half < step; half++) {
        const [p0, p1, p2, p3] = planes.slice(4 * half, 4 * half + 4).map(view) as [
          Uint32Array,
          Uint32Array,
          Uint32Array,
          Uint32Array,
        ];
        join4(words, half, step, p0, p1, p2, p3, quads);
      }
    }
  }
  for (let i = quads * 4; i < count; i++) {
    for (let k = 0; k < width; k++) out[i * width + k] = planes[k]![i]!;
  }
  return out;
}

function join2(w: Uint32Array, p0: Uint32Array, p1: Uint32Array, quads: number): void {
  for (let q = 0, j = 0; q < quads; q++, j += 2) {
    const x = p0[q]!;
    const y = p1[q]!;
    // Bytes of x and y paired (y2 x2 y0 x0, y3 x3 y1 x1), then the pairs put in order: 16
    // operations against 20: 1 Mi float16 elements interleaved in 0.606 against 0.656 ms (warm memory).
    const even = (x & 0x00ff00ff) | ((y & 0x00ff00ff) << 8);
    const odd = ((x >>> 8) & 0x00ff00ff) | (y & 0xff00ff00);
    w[j] = (even & 0xffff) | (odd << 16);
    w[j + 1] = (even >>> 16) | (odd & 0xffff0000);
  }
}

function join4(
  w: Uint32Array,
  from: number,
  step: number,
  p0: Uint32Array,
  p1: Uint32Array,
  p2: Uint32Array,
  p3: Uint32Array,
  quads: number,
): void {
  for (let q = 0, j = from; q < quads; q++, j += 4 * step) {
    const a = p0[q]!;
    const b = p1[q]!;
    const c = p2[q]!;
    const d = p3[q]!;
    // The transpose of split4 (its own inverse), in the same two steps.
    const ab02 = (a & 0x00ff00ff) | ((b & 0x00ff00ff) << 8);
    const ab13 = ((a >>> 8) & 0x00ff00ff) | (b & 0xff00ff00);
    const cd02 = (c & 0x00ff00ff) | ((d & 0x00ff00ff) << 8);
    const cd13 = ((c >>> 8) & 0x00ff00ff) | (d & 0xff00ff00);
    w[j] = (ab02 & 0xffff) | (cd02 << 16);
    w[j + step] = (ab13 & 0xffff) | (cd13 << 16);
    w[j + 2 * step] = (ab02 >>> 16) | (cd02 & 0xffff0000);
    w[j + 3 * step] = (ab13 >>> 16) | (cd13 & 0xffff0000);
  }
}

/** Idle scratch kept for the next encoder or decoder of this thread: at most this many bytes in all. */
const IDLE_SCRATCH_BYTES = 64 * 2 ** 20;
/** And at most this many scratches (an encoder takes one, a verifying decoder two). */
const IDLE_SCRATCH_COUNT = 2;
const idle: PlaneScratch[] = [];

/**
 * Buffers reused from one tensor to the next, so they do not cost fresh memory per tensor: by one
 * encoder for the planes that are only deflate input and for the deflate output, by a decoder for
 * inflated planes and, verifying, for the decoded bytes it hashes and drops. Taken with
 * {@linkcode PlaneScratch.acquire} and given back with {@linkcode PlaneScratch.release}, they also
 * carry over from one save or load to the next (a training loop's periodic saves), up to 64 MiB:
 * first-touching fresh memory is slow (0.15-0.4 GB/s on this project's VM).
 *
 * @example
 * ```ts
 * import { PlaneScratch } from "./_bytegroup.ts";
 * import assert from "node:assert/strict";
 * const scratch = PlaneScratch.acquire();
 * const plane = scratch.take(0, 1000);
 * scratch.release();
 * const next = PlaneScratch.acquire(); // the same buffers, for the next save or load
 * assert.equal(next.take(0, 500).buffer, plane.buffer);
 * next.release();
 * ```
 */
export class PlaneScratch {
  #buffers: Uint8Array[] = [];
  #allocate: (n: number) => Uint8Array;
  #released = false;

  /** Buffers come from `allocate` (4-byte aligned views; plain new memory by default). */
  constructor(allocate: (n: number) => Uint8Array = (n) => new Uint8Array(n)) {
    this.#allocate = allocate;
  }

  /** An idle scratch of this thread's, or a new one. Give it back with {@linkcode release}. */
  static acquire(): PlaneScratch {
    const s = idle.pop() ?? new PlaneScratch();
    s.#released = false;
    return s;
  }

  /**
   * Done with every buffer it handed out (no view of one may be used after this): kept for the
   * next {@linkcode acquire} unless that would keep more than 64 MiB idle. Once only.
   */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    const held = idle.reduce((n, s) => n + s.byteLength, 0);
    if (idle.length < IDLE_SCRATCH_COUNT && held + this.byteLength <= IDLE_SCRATCH_BYTES) idle.push(this);
  }

  /** Bytes held. */
  get byteLength(): number {
    return this.#buffers.reduce((n, b) => n + (b?.byteLength ?? 0), 0);
  }

  /** Buffer k's first `n` bytes (grown by doubling when short), valid until the next call with the same k. */
  take(k: number, n: number): Uint8Array {
    const b = this.#buffers[k];
    if (b && b.byteLength >= n) return b.subarray(0, n);
    const grown = this.#allocate(Math.max(n, (b?.byteLength ?? 0) * 2));
    this.#buffers[k] = grown;
    return grown.subarray(0, n);
  }
}

/**
 * Which planes may pay to deflate: those whose Huffman code ({@linkcode huffmanBits}), estimated
 * from the byte counts of their first {@linkcode SAMPLE_BYTES} bytes (of the whole plane, for a
 * tensor up to twice that), takes less than {@linkcode SAMPLE_PAYS} of their size. Counting bytes
 * costs a fraction of deflating a sample, and a Huffman-only deflate is within a fraction of a
 * percent of that code (its block headers). The code is built only when the counts' entropy leaves
 * the answer open: a Huffman code takes at least the entropy and less than one bit a byte more.
 */
function candidates(bytes: Uint8Array, width: number): boolean[] {
  const count = bytes.byteLength / width;
  const n = count <= 2 * SAMPLE_BYTES ? count : SAMPLE_BYTES;
  const counts = sampleCounts.subarray(0, width * 256);
  counts.fill(0);
  const end = n * width;
  let i = 0;
  if (bytes.byteOffset % 4 === 0) {
    // A word at a time: byte b of word j belongs to plane (4j + b) % width.
    const words = new Uint32Array(bytes.buffer, bytes.byteOffset, end >>> 2);
    const lane = width === 2 ? [0, 256, 0, 256] : [0, 256, 512, 768];
    const [t0, t1, t2, t3] = lane as [number, number, number, number];
    const step = width === 8 ? 1024 : 0; // a float64's upper word holds planes 4-7
    for (let j = 0; j < words.length; j++) {
      const x = words[j]!;
      const base = (j & 1) * step;
      counts[base + t0 + (x & 255)]!++;
      counts[base + t1 + ((x >>> 8) & 255)]!++;
      counts[base + t2 + ((x >>> 16) & 255)]!++;
      counts[base + t3 + (x >>> 24)]!++;
    }
    i = words.length * 4;
  }
  for (; i < end; i++) counts[((i % width) << 8) | bytes[i]!]!++;
  const budget = 8 * SAMPLE_PAYS * n;
  return Array.from({ length: width }, (_, k) => {
    const plane = counts.subarray(k << 8, (k + 1) << 8);
    const least = entropyBits(plane, n);
    // A margin for the rounding of the logarithms; inside it, the code decides.
    const margin = 1e-6 * n;
    if (least - margin >= budget) return false;
    if (least + n + margin < budget) return true;
    return huffmanBits(plane) < budget;
  });
}

/** The entropy of byte counts that add up to `n`, times `n`: the bits no code of them goes under. */
function entropyBits(counts: Uint32Array, n: number): number {
  let sum = 0;
  for (let s = 0; s < counts.length; s++) {
    const c = counts[s]!;
    if (c > 0) sum += c * Math.log2(c);
  }
  return n * Math.log2(n) - sum;
}

/** Byte counts of {@linkcode candidates}' sample, one table of 256 per plane (up to 8 planes). */
const sampleCounts = new Uint32Array(8 * 256);
/** {@linkcode huffmanBits}' queues: the sorted counts, and the merged weights. */
const leafQueue = new Float64Array(256);
const mergedQueue = new Float64Array(256);

/**
 * The bits a Huffman code takes for symbols that occur `counts` times (zero counts left out; a
 * symbol alone still takes a bit per occurrence, as in deflate): the sum of the merged weights of
 * the Huffman tree, with no limit on code length (the encoder's 12-bit cap rarely binds for byte planes).
 *
 * @example
 * ```ts
 * import { huffmanBits } from "./_bytegroup.ts";
 * import assert from "node:assert/strict";
 * assert.equal(huffmanBits([2, 1, 1]), 6); // codes of 1, 2 and 2 bits
 * assert.equal(huffmanBits([0, 5, 0]), 5);
 * ```
 */
export function huffmanBits(counts: ArrayLike<number>): number {
  // Counts of more than 256 symbols are not byte counts: sized for them instead of the queues.
  const big = counts.length > leafQueue.length;
  const leaves = big ? new Float64Array(counts.length) : leafQueue;
  const merged = big ? new Float64Array(counts.length) : mergedQueue;
  let n = 0;
  for (let s = 0; s < counts.length; s++) if (counts[s]! > 0) leaves[n++] = counts[s]!;
  if (n < 2) return n === 1 ? leaves[0]! : 0;
  const sorted = leaves.subarray(0, n).sort();
  // Two queues: the sorted leaves, and the merged nodes, which are made in ascending order.
  let i = 0;
  let j = 0;
  let made = 0;
  let bits = 0;
  for (let left = n; left > 1; left--) {
    let sum = 0;
    for (let take = 0; take < 2; take++) {
      sum += j >= made || (i < n && sorted[i]! <= merged[j]!) ? sorted[i++]! : merged[j++]!;
    }
    merged[made++] = sum;
    bits += sum;
  }
  return bits;
}

/**
 * The byte-grouped body of a float tensor's `bytes` as parts to write in order (plane table, then
 * the planes), or `undefined` when it would not be smaller than the raw bytes (or the dtype is not
 * a float): the caller then writes the tensor raw. {@linkcode planByteGroups}, then its `parts()`.
 *
 * @example
 * ```ts
 * import { encodeByteGroups } from "./_bytegroup.ts";
 * import assert from "node:assert/strict";
 * const weights = new Float32Array(4096).map((_, i) => Math.sin(i) / 50);
 * const body = encodeByteGroups("float32", new Uint8Array(weights.buffer))!;
 * assert.ok(body.byteLength < weights.byteLength);
 * assert.equal(body.parts.reduce((n, p) => n + p.byteLength, 0), body.byteLength);
 * ```
 */
export function encodeByteGroups(
  dtype: DType,
  bytes: Uint8Array,
  options: { scratch?: PlaneScratch; transient?: boolean } = {},
): { parts: Uint8Array[]; byteLength: number } | undefined {
  const plan = planByteGroups(dtype, bytes, options);
  return plan && { parts: [...plan.parts()], byteLength: plan.byteLength };
}

/** A byte-grouped body whose size is known before its planes are split and coded. */
export interface ByteGroupPlan {
  /** Bytes of the body. */
  readonly byteLength: number;
  /**
   * The body as parts to write in order: splits the planes now, and deflates each one planned as
   * the parts are iterated to it, so the stored planes before it can be written meanwhile. Reads
   * the tensor's bytes, which must not have changed since the plan (call it before anything else
   * may run), only now; once only. The parts are to be taken before the scratch is used again.
   */
  parts(): Iterable<Uint8Array>;
}

/**
 * Plans the byte-grouped body of a float tensor's `bytes` (see {@linkcode encodeByteGroups}):
 * which planes to deflate and with which codes, chosen from the byte counts of each plane read
 * straight from the tensor, and so the body's exact size, before anything is split or coded (a
 * writer can put the size, and start a digest that covers it, first). `undefined` when the body
 * would not be smaller than the raw bytes, or the dtype is not a float. With `scratch`, the planes
 * to be deflated are split, and deflated, into buffers kept from one call to the next; with
 * `transient` too, the parts are views of those buffers, and the planes stored as they are come
 * from them too (the parts are then valid only until the next call with that scratch).
 *
 * @example
 * ```ts
 * import { planByteGroups } from "./_bytegroup.ts";
 * import assert from "node:assert/strict";
 * const weights = new Float32Array(4096).map((_, i) => Math.sin(i) / 50);
 * const plan = planByteGroups("float32", new Uint8Array(weights.buffer))!;
 * const parts = [...plan.parts()];
 * assert.equal(parts.reduce((n, p) => n + p.byteLength, 0), plan.byteLength);
 * ```
 */
export function planByteGroups(
  dtype: DType,
  bytes: Uint8Array,
  options: { scratch?: PlaneScratch; transient?: boolean } = {},
): ByteGroupPlan | undefined {
  const width = FLOAT_WIDTH[dtype];
  if (width === undefined || bytes.byteLength === 0) return undefined;
  const { scratch = new PlaneScratch(), transient = false } = options;
  const count = bytes.byteLength / width;
  const plans = candidates(bytes, width).map((pays, k): LiteralsPlan | undefined => {
    if (!pays) return undefined;
    const plan = planLiterals(count, planeCounts(bytes, width, k));
    // A plane that would not shrink after all is stored as it is.
    return plan.byteLength < count ? plan : undefined;
  });
  const table = new Uint8Array(BYTEGROUP_HEADER_BYTES + width * PLANE_ENTRY_BYTES);
  const v = new DataView(table.buffer);
  table[0] = BYTEGROUP_VERSION;
  table[1] = width;
  let byteLength = table.byteLength;
  plans.forEach((plan, k) => {
    const at = BYTEGROUP_HEADER_BYTES + k * PLANE_ENTRY_BYTES;
    table[at] = plan ? PLANE_DEFLATE : PLANE_STORED;
    const length = plan?.byteLength ?? count;
    v.setBigUint64(at + 8, BigInt(length), true);
    byteLength += length;
  });
  if (byteLength >= bytes.byteLength) return undefined;
  let done = false;
  const parts = (): Iterable<Uint8Array> => {
    if (done) throw new TypeError("planByteGroups: parts() was already called");
    done = true;
    const planes = splitPlanes(
      bytes,
      width,
      (k, n) => plans[k] || transient ? scratch.take(k, n) : new Uint8Array(n),
    );
    return (function* () {
      yield table;
      for (const [k, plane] of planes.entries()) {
        const plan = plans[k];
        if (!plan) {
          yield plane;
          continue;
        }
        // Deflated into scratch memory (the bound is the plane's size and a little more, of which
        // only the output is touched), then kept as a copy of the output's size unless transient.
        const packed = writeLiterals(plan, plane, scratch.take(width + k, deflateBound(plane.byteLength)));
        yield transient ? packed : packed.slice();
      }
    })();
  };
  return { byteLength, parts };
}

/** Counts of byte `k` of each element, per block of the deflate's ({@linkcode planLiterals}). */
let planeCountsBuffer = new Uint32Array(256);
/** One block's counts in four tables (independent increments), summed into the block's. */
const laneCounts = [0, 1, 2, 3].map(() => new Uint32Array(256)) as [Uint32Array, Uint32Array, Uint32Array, Uint32Array];

/**
 * The counts of byte `k` of each of the `width`-byte elements of `bytes` (what plane k of
 * {@linkcode splitPlanes} holds), 256 per {@linkcode LITERALS_BLOCK_BYTES} elements, read from the
 * elements themselves: a word at a time where `bytes` is 4-byte aligned; for a plane that
 * {@linkcode candidates} counted whole, the counts it just took. Valid until the next call of
 * either.
 */
function planeCounts(bytes: Uint8Array, width: number, k: number): Uint32Array {
  const count = bytes.byteLength / width;
  // A plane this short, candidates() (called just before) counted whole, and it is one block.
  if (count <= 2 * SAMPLE_BYTES && count <= LITERALS_BLOCK_BYTES) return sampleCounts.subarray(k << 8, (k + 1) << 8);
  const blocks = Math.ceil(count / LITERALS_BLOCK_BYTES);
  if (planeCountsBuffer.length < 256 * blocks) planeCountsBuffer = new Uint32Array(256 * blocks);
  const out = planeCountsBuffer.subarray(0, 256 * blocks);
  const words = bytes.byteOffset % 4 === 0
    ? new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 2)
    : undefined;
  const [c0, c1, c2, c3] = laneCounts;
  const shift = 8 * (k & 3);
  for (let b = 0; b < blocks; b++) {
    for (const c of laneCounts) c.fill(0);
    const from = b * LITERALS_BLOCK_BYTES;
    const to = Math.min(count, from + LITERALS_BLOCK_BYTES);
    let i = from;
    if (words && width === 4) {
      for (; i + 3 < to; i += 4) {
        c0[(words[i]! >>> shift) & 255]!++;
        c1[(words[i + 1]! >>> shift) & 255]!++;
        c2[(words[i + 2]! >>> shift) & 255]!++;
        c3[(words[i + 3]! >>> shift) & 255]!++;
      }
    } else if (words && width === 2) {
      // Two elements per word: byte k of the first at bit 8k, of the second at 16 + 8k.
      for (let j = i >>> 1; i + 3 < to; i += 4, j += 2) {
        const x = words[j]!;
        const y = words[j + 1]!;
        c0[(x >>> shift) & 255]!++;
        c1[(x >>> (16 + shift)) & 255]!++;
        c2[(y >>> shift) & 255]!++;
        c3[(y >>> (16 + shift)) & 255]!++;
      }
    } else if (words && width === 8) {
      // One element per two words: byte k in word k >> 2 of it.
      for (let j = 2 * i + (k >>> 2); i + 3 < to; i += 4, j += 8) {
        c0[(words[j]! >>> shift) & 255]!++;
        c1[(words[j + 2]! >>> shift) & 255]!++;
        c2[(words[j + 4]! >>> shift) & 255]!++;
        c3[(words[j + 6]! >>> shift) & 255]!++;
      }
    }
    for (; i < to; i++) c0[bytes[i * width + k]!]!++;
    for (let s = 0; s < 256; s++) out[b * 256 + s] = c0[s]! + c1[s]! + c2[s]! + c3[s]!;
  }
  return out;
}

/** Where {@linkcode decodeByteGroups} puts what it decodes, and which inflater it falls back to. */
export interface DecodeByteGroupsOptions {
  /** The general inflater for planes that are not literals only (see `inflateRaw`). */
  backend?: DeflateBackend;
  /** The buffer for the tensor bytes (see {@linkcode joinPlanes}); a new one by default. */
  alloc?: (n: number) => Uint8Array;
  /** Buffers for inflated planes, reused from one call to the next; new ones by default. */
  scratch?: PlaneScratch;
}

/**
 * The tensor bytes a byte-grouped `body` holds, for a tensor of `count` elements of `dtype`
 * (named `name` in messages; the body starts at `offset` in the stream). Every length in the body
 * is checked against the body and against `count` before anything is allocated or inflated;
 * a malformed body is a `SyntaxError` naming the tensor, the plane and the offset.
 *
 * @example
 * ```ts
 * import { decodeByteGroups, encodeByteGroups } from "./_bytegroup.ts";
 * import { concatBytes } from "../dtype.ts";
 * import assert from "node:assert/strict";
 * const weights = new Float32Array(4096).map((_, i) => Math.sin(i) / 50);
 * const bytes = new Uint8Array(weights.buffer);
 * const { parts } = encodeByteGroups("float32", bytes)!;
 * const body = concatBytes(parts);
 * assert.deepEqual(await decodeByteGroups(body, "float32", 4096, "w", 0), bytes);
 * ```
 */
export async function decodeByteGroups(
  body: Uint8Array,
  dtype: DType,
  count: number,
  name: string,
  offset: number,
  options: DecodeByteGroupsOptions = {},
): Promise<Uint8Array> {
  const { data, parts } = decodeByteGroupParts(body, dtype, count, name, offset, options);
  for await (const _ of parts);
  return data;
}

/** Bytes of tensor data {@linkcode decodeByteGroupParts} interleaves per part. */
const PART_BYTES = 2 ** 20;

/**
 * {@linkcode decodeByteGroups} a part at a time: the buffer the tensor bytes go into (the body's
 * lengths checked first, as there), and a generator that fills it in order, up to 1 MiB per step
 * (the planes inflated a block at a time, as far as the part needs, and interleaved), yielding
 * each filled part. So a caller can hash one part while the next is decoded. The buffer holds the
 * tensor once the generator is done; it throws the same errors as {@linkcode decodeByteGroups}.
 *
 * @example
 * ```ts
 * import { decodeByteGroupParts, encodeByteGroups } from "./_bytegroup.ts";
 * import { concatBytes } from "../dtype.ts";
 * import assert from "node:assert/strict";
 * const weights = new Float32Array(600_000).map((_, i) => Math.sin(i) / 50);
 * const bytes = new Uint8Array(weights.buffer);
 * const body = concatBytes(encodeByteGroups("float32", bytes)!.parts);
 * const { data, parts } = decodeByteGroupParts(body, "float32", 600_000, "w", 0);
 * const sizes = [];
 * for await (const part of parts) sizes.push(part.byteLength);
 * assert.deepEqual(sizes, [1048576, 1048576, 302848]);
 * assert.deepEqual(data, bytes);
 * ```
 */
export function decodeByteGroupParts(
  body: Uint8Array,
  dtype: DType,
  count: number,
  name: string,
  offset: number,
  options: DecodeByteGroupsOptions = {},
): { data: Uint8Array; parts: AsyncGenerator<Uint8Array, void, undefined> } {
  const { backend, alloc = (n: number) => new Uint8Array(n), scratch } = options;
  const subject = `tensor ${JSON.stringify(name)}`;
  const fail = (why: string, at: number): never => {
    throw new SyntaxError(`Cannot decode checkpoint: ${subject} ${why} at offset ${offset + at}`);
  };
  const width = FLOAT_WIDTH[dtype];
  if (width === undefined) fail(`of dtype ${dtype} cannot be byte-grouped (only float dtypes are)`, 0);
  const tableEnd = BYTEGROUP_HEADER_BYTES + width! * PLANE_ENTRY_BYTES;
  if (body.byteLength < tableEnd) {
    fail(`has a byte-grouped body of ${body.byteLength} bytes, shorter than its ${tableEnd}-byte plane table`, 0);
  }
  if (body[0] !== BYTEGROUP_VERSION) {
    fail(`has byte-group version ${body[0]} (this reader knows ${BYTEGROUP_VERSION})`, 0);
  }
  if (body[1] !== width) fail(`declares ${body[1]} byte planes, dtype ${dtype} has ${width}`, 1);
  for (let i = 2; i < BYTEGROUP_HEADER_BYTES; i++) if (body[i] !== 0) fail("has non-zero reserved bytes", i);
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const planes: { method: number; at: number; length: number }[] = [];
  let at = tableEnd;
  for (let k = 0; k < width!; k++) {
    const e = BYTEGROUP_HEADER_BYTES + k * PLANE_ENTRY_BYTES;
    const method = body[e]!;
    if (method !== PLANE_STORED && method !== PLANE_DEFLATE) fail(`plane ${k} has unknown method ${method}`, e);
    for (let i = 1; i < 8; i++) if (body[e + i] !== 0) fail(`plane ${k} has non-zero reserved bytes`, e + i);
    const declared = v.getBigUint64(e + 8, true);
    const remain = body.byteLength - at;
    if (declared > BigInt(remain)) fail(`plane ${k} declares ${declared} bytes but ${remain} remain`, e + 8);
    const length = Number(declared);
    if (method === PLANE_STORED && length !== count) {
      fail(`plane ${k} is stored with ${length} bytes, needs ${count} (one per element)`, e + 8);
    }
    if (method === PLANE_DEFLATE && (length === 0 || length >= count)) {
      fail(`plane ${k} is deflated to ${length} bytes, not between 1 and ${count - 1}`, e + 8);
    }
    planes.push({ method, at, length });
    at += length;
  }
  if (at !== body.byteLength) fail(`has ${body.byteLength - at} bytes after its last plane`, at);
  const data = alloc(count * width!);
  if (data.byteLength !== count * width! || data.byteOffset % 4 !== 0) {
    throw new RangeError(`decodeByteGroupParts: alloc gave ${data.byteLength} bytes at offset ${data.byteOffset}`);
  }
  async function* parts(): AsyncGenerator<Uint8Array, void, undefined> {
    // Each plane's bytes: stored ones in the body, deflated ones inflated (a block at a time,
    // while it takes the stream) into a scratch buffer.
    const sources = planes.map((p) => body.subarray(p.at, p.at + p.length));
    const inflaters = planes.map((p, k) => {
      if (p.method === PLANE_STORED) return undefined;
      const into = scratch?.take(k, count) ?? new Uint8Array(count);
      const inflater = new LiteralsInflater(sources[k]!, into);
      sources[k] = into;
      return inflater;
    });
    const step = PART_BYTES / width!; // a multiple of 4 elements: every part starts word-aligned
    for (let from = 0; from < count; from += step) {
      const to = Math.min(count, from + step);
      for (const [k, inflater] of inflaters.entries()) {
        if (!inflater) continue;
        if (to < count ? inflater.fill(to) && inflater.written >= to : inflater.fill() && inflater.finished) continue;
        // Not literals only (or malformed): the general inflater takes the whole plane, and words
        // the error (the bytes already interleaved are the same: the literals before a match).
        const p = planes[k]!;
        const bytes = body.subarray(p.at, p.at + p.length);
        sources[k] = await inflateRaw(bytes, count, `${subject} plane ${k}`, offset + p.at, backend, sources[k]);
        inflaters[k] = undefined;
      }
      const part = data.subarray(from * width!, to * width!);
      joinPlanes(sources.map((s) => s.subarray(from, to)), width!, () => part);
      yield part;
    }
  }
  return { data, parts: parts() };
}
