// Huffman-only raw deflate (RFC 1951) of byte planes, in JavaScript for every runtime: what zlib's
// Z_HUFFMAN_ONLY strategy does (no match search: an exponent plane has little to match), with one
// dynamic block per BLOCK_BYTES of input instead of one per 16 Ki symbols, codes of at most
// MAX_CODE_BITS bits so that two fit in the bit buffer at once, and no output but the result.
// Measured on exponent planes here: 1.5-2.4 ms per MiB with the byte counts, against node:zlib's
// 3.6-4.8, and within 0.3% of zlib's size. Any inflater reads the output (node:zlib,
// DecompressionStream, src/format/_inflate_literals.ts).

/** Input bytes per block: each block has its own code, sized to the plane's statistics. */
const BLOCK_BYTES = 256 * 1024;
/** Longest literal code: two codes and 7 pending bits fit in a 31-bit buffer. */
const MAX_CODE_BITS = 12;
/** Longest code-length code (RFC 1951: 3 bits per length). */
const MAX_CODE_LENGTH_BITS = 7;
/** A stored block holds at most this many bytes. */
const STORED_MAX = 65_535;
const END_OF_BLOCK = 256;
const CODE_LENGTH_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/**
 * The most bytes {@linkcode deflateLiterals} writes for `n` bytes of input (and the least room it
 * takes in a caller's buffer).
 *
 * @example
 * ```ts
 * import { deflateBound, deflateLiterals } from "./_deflate_literals.ts";
 * import assert from "node:assert/strict";
 * const random = crypto.getRandomValues(new Uint8Array(4096)); // stored: coding would not shrink it
 * assert.ok(deflateLiterals(random).byteLength <= deflateBound(4096));
 * ```
 */
export function deflateBound(n: number): number {
  // Every block is at most its stored form (5 bytes of header per 65535 bytes), plus a final
  // empty stored block's 5 bytes when the input is empty; 8 more for the hot loop's word stores.
  return n + 5 * (Math.ceil(n / STORED_MAX) + Math.ceil(n / BLOCK_BYTES)) + 13;
}

/**
 * Huffman-only raw deflate of `bytes`: one dynamic block per 256 KiB of input (a stored block where
 * coding would not make it smaller), into `out` where given (at least {@linkcode deflateBound}
 * bytes; the result is a view of it) or a new buffer. The same bytes as
 * {@linkcode writeLiterals} of {@linkcode planLiterals} of the input's {@linkcode blockCounts}.
 *
 * @example
 * ```ts
 * import { deflateLiterals } from "./_deflate_literals.ts";
 * import { inflateRawSync } from "node:zlib";
 * import assert from "node:assert/strict";
 * const plane = new Uint8Array(1000).map((_, i) => 0x3c + (i % 3));
 * const packed = deflateLiterals(plane);
 * assert.ok(packed.byteLength < 300);
 * assert.deepEqual(new Uint8Array(inflateRawSync(packed)), plane);
 * ```
 */
export function deflateLiterals(bytes: Uint8Array, out?: Uint8Array): Uint8Array {
  return writeLiterals(planLiterals(bytes.byteLength, blockCounts(bytes)), bytes, out);
}

/** Input bytes per block of {@linkcode planLiterals}: each block has a code of its own. */
export const LITERALS_BLOCK_BYTES: number = BLOCK_BYTES;

/** One block's code, chosen from its byte counts. */
interface BlockPlan {
  /** Input bytes. */
  length: number;
  /** Written as stored blocks: coding would not make it smaller. */
  stored: boolean;
  /** Code lengths of the 256 byte values and end of block (zero for values absent). */
  litLengths: Uint8Array;
  /** Code lengths of the code-length alphabet, and the header's run-length coded symbols. */
  clLengths: Uint8Array;
  clSymbols: Int32Array;
  /** Code-length code lengths written (4-19). */
  hclen: number;
}

/**
 * The codes of a Huffman-only deflate and its exact size, chosen from byte counts alone
 * ({@linkcode planLiterals}), before any byte is written: a caller that stores the size ahead of
 * the data knows it before it does the coding.
 */
export interface LiteralsPlan {
  /** Input bytes. */
  readonly inputLength: number;
  /** Exactly the bytes {@linkcode writeLiterals} writes. */
  readonly byteLength: number;
  /** @internal One plan per block of {@linkcode LITERALS_BLOCK_BYTES} input bytes. */
  readonly blocks: readonly BlockPlan[];
}

/**
 * The byte counts of each block of {@linkcode LITERALS_BLOCK_BYTES} bytes of `bytes`, 256 per
 * block.
 *
 * @example
 * ```ts
 * import { blockCounts } from "./_deflate_literals.ts";
 * import assert from "node:assert/strict";
 * const counts = blockCounts(new Uint8Array([7, 7, 9]));
 * assert.deepEqual([counts[7], counts[9], counts.length], [2, 1, 256]);
 * ```
 */
export function blockCounts(bytes: Uint8Array): Uint32Array {
  const blocks = Math.ceil(bytes.byteLength / BLOCK_BYTES);
  const out = new Uint32Array(blocks * 256);
  for (let b = 0; b < blocks; b++) {
    histogram(bytes.subarray(b * BLOCK_BYTES, (b + 1) * BLOCK_BYTES));
    out.set(freq.subarray(0, 256), b * 256);
  }
  return out;
}

/**
 * Chooses the code of each block of a Huffman-only deflate of `n` bytes from their byte counts
 * (256 per block of {@linkcode LITERALS_BLOCK_BYTES} bytes, as {@linkcode blockCounts} gives),
 * and so its exact size. {@linkcode writeLiterals} then writes bytes with those counts.
 *
 * @example
 * ```ts
 * import { blockCounts, planLiterals, writeLiterals } from "./_deflate_literals.ts";
 * import assert from "node:assert/strict";
 * const plane = new Uint8Array(5000).map((_, i) => 0x3c + (i % 5 === 0 ? 1 : 0));
 * const plan = planLiterals(plane.byteLength, blockCounts(plane));
 * assert.equal(writeLiterals(plan, plane).byteLength, plan.byteLength);
 * ```
 */
export function planLiterals(n: number, counts: Uint32Array): LiteralsPlan {
  const blocks: BlockPlan[] = [];
  if (n === 0) {
    // A final empty stored block: 3 bits, padding, LEN and NLEN.
    return { inputLength: 0, byteLength: 5, blocks };
  }
  let bits = 0;
  for (let at = 0, b = 0; at < n; at += BLOCK_BYTES, b++) {
    const length = Math.min(BLOCK_BYTES, n - at);
    let total = 0;
    for (let s = 0; s < 256; s++) total += freq[s] = counts[b * 256 + s]!;
    if (total !== length) throw new RangeError(`planLiterals: block ${b} counts ${total} bytes, holds ${length}`);
    freq[END_OF_BLOCK] = 1;
    codeLengths(freq, END_OF_BLOCK + 1, MAX_CODE_BITS, litLengths);
    // The header: 257 literal/length lengths and two distance codes of one bit (as zlib writes for
    // a block without matches: some inflaters want at least one distance code), run-length coded.
    const runs = runLengths(litLengths);
    codeLengths(clFreq, 19, MAX_CODE_LENGTH_BITS, clLengths);
    let hclen = 19;
    while (hclen > 4 && clLengths[CODE_LENGTH_ORDER[hclen - 1]!] === 0) hclen--;
    let headerBits = 14 + 3 * hclen;
    for (let i = 0; i < runs; i++) {
      const s = clSymbols[i]!;
      headerBits += clLengths[s & 255]! + (s >>> 16);
    }
    let dataBits = litLengths[END_OF_BLOCK]!;
    for (let s = 0; s < 256; s++) dataBits += freq[s]! * litLengths[s]!;
    const storedBits = 8 * (length + 5 * Math.ceil(length / STORED_MAX)) + 7;
    const stored = 3 + headerBits + dataBits >= storedBits;
    if (stored) {
      // Each stored block: 3 bits, padding to a byte, LEN and NLEN, the bytes.
      for (let part = 0; part < length; part += STORED_MAX) {
        bits = Math.ceil((bits + 3) / 8) * 8 + 32 + 8 * Math.min(STORED_MAX, length - part);
      }
    } else bits += 3 + headerBits + dataBits;
    blocks.push({
      length,
      stored,
      litLengths: litLengths.slice(),
      clLengths: clLengths.slice(),
      clSymbols: clSymbols.slice(0, runs),
      hclen,
    });
  }
  return { inputLength: n, byteLength: Math.ceil(bits / 8), blocks };
}

/**
 * Writes `bytes` as {@linkcode planLiterals} planned from their counts, into `out` where given (at
 * least {@linkcode deflateBound} bytes; the result is a view of it) or a new buffer: exactly
 * `plan.byteLength` bytes. The bytes must be those the counts were taken of (another order is
 * fine): a value the plan has no code for would be lost. Another length, or output of another size
 * than planned (what other bytes nearly always give), is a `RangeError`.
 *
 * @example
 * ```ts
 * import { blockCounts, planLiterals, writeLiterals } from "./_deflate_literals.ts";
 * import { inflateRawSync } from "node:zlib";
 * import assert from "node:assert/strict";
 * const plane = new Uint8Array(3000).map((_, i) => 0x3c + (i % 4 === 0 ? 1 : 0));
 * const plan = planLiterals(plane.byteLength, blockCounts(plane)); // the size is known here
 * const packed = writeLiterals(plan, plane);
 * assert.equal(packed.byteLength, plan.byteLength);
 * assert.deepEqual(new Uint8Array(inflateRawSync(packed)), plane);
 * assert.throws(() => writeLiterals(plan, plane.subarray(1)), RangeError);
 * ```
 */
export function writeLiterals(plan: LiteralsPlan, bytes: Uint8Array, out?: Uint8Array): Uint8Array {
  const n = bytes.byteLength;
  if (n !== plan.inputLength) throw new RangeError(`writeLiterals: ${n} bytes, the plan is for ${plan.inputLength}`);
  const bound = deflateBound(n);
  if (out !== undefined && out.byteLength < bound) {
    throw new RangeError(`writeLiterals: out has ${out.byteLength} bytes, needs ${bound}`);
  }
  const w = new BitWriter(out ?? new Uint8Array(bound));
  if (n === 0) {
    w.bits(1, 1);
    w.bits(0, 2);
    w.stored(bytes);
    return w.result();
  }
  let at = 0;
  for (const block of plan.blocks) {
    writeBlock(w, bytes.subarray(at, at + block.length), block, at + block.length >= n);
    at += block.length;
  }
  const packed = w.result();
  if (packed.byteLength !== plan.byteLength) {
    throw new RangeError(
      `writeLiterals: wrote ${packed.byteLength} bytes, planned ${plan.byteLength} (other bytes than planned)`,
    );
  }
  return packed;
}

/** An LSB-first bit writer over a buffer large enough for everything written (see deflateBound). */
class BitWriter {
  readonly view: DataView;
  acc = 0;
  cnt = 0;
  pos = 0;
  constructor(readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  /** The low `n` bits of `value` (n ≤ 16). */
  bits(value: number, n: number): void {
    this.acc |= value << this.cnt;
    this.cnt += n;
    while (this.cnt >= 8) {
      this.buf[this.pos++] = this.acc;
      this.acc >>>= 8;
      this.cnt -= 8;
    }
  }

  /** Pads to a byte boundary, then LEN, NLEN and the bytes (RFC 1951, 3.2.4). */
  stored(data: Uint8Array): void {
    if (this.cnt > 0) this.bits(0, 8 - this.cnt);
    const len = data.byteLength;
    this.buf[this.pos++] = len & 255;
    this.buf[this.pos++] = len >>> 8;
    this.buf[this.pos++] = ~len & 255;
    this.buf[this.pos++] = (~len >>> 8) & 255;
    this.buf.set(data, this.pos);
    this.pos += len;
  }

  result(): Uint8Array {
    if (this.cnt > 0) this.bits(0, 8 - this.cnt);
    return this.buf.subarray(0, this.pos);
  }
}

// Tables of the block being planned or written (one thread runs one plan or write to the end: no
// await inside).
/** Byte counts in four tables (independent increments), summed into `freq`. */
const counts = [0, 1, 2, 3].map(() => new Uint32Array(256));
const freq = new Uint32Array(END_OF_BLOCK + 1);
const litLengths = new Uint8Array(END_OF_BLOCK + 1);
const litCodes = new Uint16Array(END_OF_BLOCK + 1);
/** code | length << 16 per byte value. */
const litTable = new Int32Array(256);
/**
 * The hot loop's table: for two bytes a, b (the index a | b << 8), a's code then b's as one code of
 * at most 24 bits, with its length in bits 24-28. Filled for the pairs of bytes the block holds.
 */
const pairTable = new Int32Array(65536);
/** The byte values a block holds. */
const present = new Uint8Array(256);
/**
 * Blocks of up to this many byte values are coded through the pair table (its k² entries cost
 * less than they save): 8 MiB planes of 16-128 values took 10.3-12.0 ms against 13.1-13.4 with two
 * lookups a step, of 192 values 14.0 against 13.6.
 */
const PAIR_MAX_SYMBOLS = 128;
const clFreq = new Uint32Array(19);
const clLengths = new Uint8Array(19);
const clCodes = new Uint16Array(19);
/** The code-length symbols of a block's header: symbol | extra bits << 8 | extra count << 16. */
const clSymbols = new Int32Array(END_OF_BLOCK + 1 + 2);

/**
 * Byte counts of `block` in four tables at once (independent increments), summed into `freq`;
 * a word at a time where the block is 4-byte aligned.
 */
function histogram(block: Uint8Array): void {
  for (const c of counts) c.fill(0);
  const [c0, c1, c2, c3] = counts as [Uint32Array, Uint32Array, Uint32Array, Uint32Array];
  const n = block.byteLength;
  let i = 0;
  if (block.byteOffset % 4 === 0) {
    const words = new Int32Array(block.buffer, block.byteOffset, n >>> 2);
    for (let q = 0; q < words.length; q++) {
      const x = words[q]!;
      c0[x & 255]!++;
      c1[(x >> 8) & 255]!++;
      c2[(x >> 16) & 255]!++;
      c3[(x >> 24) & 255]!++;
    }
    i = words.length * 4;
  }
  for (; i < n; i++) c0[block[i]!]!++;
  for (let s = 0; s < 256; s++) freq[s] = c0[s]! + c1[s]! + c2[s]! + c3[s]!;
}

function writeBlock(w: BitWriter, block: Uint8Array, plan: BlockPlan, final: boolean): void {
  if (plan.stored) {
    for (let at = 0; at < block.byteLength; at += STORED_MAX) {
      const part = block.subarray(at, Math.min(at + STORED_MAX, block.byteLength));
      w.bits(final && at + STORED_MAX >= block.byteLength ? 1 : 0, 1);
      w.bits(0, 2);
      w.stored(part);
    }
    return;
  }
  // Into the module's tables, which fillPairs and encodeLiterals read.
  litLengths.set(plan.litLengths);
  clLengths.set(plan.clLengths);
  const { clSymbols, hclen } = plan;
  canonicalCodes(litLengths, END_OF_BLOCK + 1, litCodes);
  canonicalCodes(clLengths, 19, clCodes);
  w.bits(final ? 1 : 0, 1);
  w.bits(2, 2);
  w.bits(END_OF_BLOCK + 1 - 257, 5); // HLIT
  w.bits(2 - 1, 5); // HDIST
  w.bits(hclen - 4, 4);
  for (let i = 0; i < hclen; i++) w.bits(clLengths[CODE_LENGTH_ORDER[i]!]!, 3);
  for (let i = 0; i < clSymbols.length; i++) {
    const s = clSymbols[i]!;
    const sym = s & 255;
    w.bits(clCodes[sym]!, clLengths[sym]!);
    if (s >>> 16) w.bits((s >>> 8) & 255, s >>> 16);
  }
  let k = 0;
  for (let s = 0; s < 256; s++) {
    litTable[s] = litCodes[s]! | (litLengths[s]! << 16);
    if (litLengths[s]! > 0) present[k++] = s;
  }
  // The pair table's k² entries pay for themselves over a block of at least 4 k² bytes.
  const pairs = k <= PAIR_MAX_SYMBOLS && 4 * k * k <= block.byteLength;
  if (pairs) fillPairs(k);
  encodeLiterals(w, block, pairs);
  w.bits(litCodes[END_OF_BLOCK]!, litLengths[END_OF_BLOCK]!);
}

function fillPairs(k: number): void {
  for (let i = 0; i < k; i++) {
    const a = present[i]!;
    const codeA = litCodes[a]!;
    const lenA = litLengths[a]!;
    for (let j = 0; j < k; j++) {
      const b = present[j]!;
      pairTable[a | (b << 8)] = (codeA | (litCodes[b]! << lenA)) | ((lenA + litLengths[b]!) << 24);
    }
  }
}

/**
 * The hot loop: two literals per step, each step storing the whole bit buffer as a little-endian
 * word and advancing by the whole bytes in it, so no step branches on the bit count. With `pairs`,
 * one lookup in the pair table gives both codes (at most 24 bits on top of at most 7 pending bits
 * fit in 31); without, two lookups give one each (two codes of at most 12 bits, the same).
 */
function encodeLiterals(w: BitWriter, block: Uint8Array, pairs: boolean): void {
  const view = w.view;
  let acc = w.acc | 0;
  let cnt = w.cnt;
  let pos = w.pos;
  const n = block.byteLength;
  let i = 0;
  if (block.byteOffset % 2 === 0) {
    // Two bytes per load (little-endian: the first byte is the low one, whose code goes first).
    const halves = new Uint16Array(block.buffer, block.byteOffset, n >>> 1);
    if (pairs) {
      for (let h = 0; h < halves.length; h++) {
        const e = pairTable[halves[h]!]!;
        acc |= (e & 0xffffff) << cnt;
        cnt += e >>> 24;
        view.setInt32(pos, acc, true);
        pos += cnt >> 3;
        acc = (acc >>> (cnt & ~7)) | 0;
        cnt &= 7;
      }
    } else {
      for (let h = 0; h < halves.length; h++) {
        const x = halves[h]!;
        const a = litTable[x & 255]!;
        const b = litTable[x >> 8]!;
        acc |= (a & 0xffff) << cnt;
        cnt += a >> 16;
        acc |= (b & 0xffff) << cnt;
        cnt += b >> 16;
        view.setInt32(pos, acc, true);
        pos += cnt >> 3;
        acc = (acc >>> (cnt & ~7)) | 0;
        cnt &= 7;
      }
    }
    i = halves.length * 2;
  }
  w.acc = acc;
  w.cnt = cnt;
  w.pos = pos;
  for (; i < n; i++) w.bits(litTable[block[i]!]! & 0xffff, litTable[block[i]!]! >> 16);
}

/**
 * Run-length codes the block's code lengths (257 literal/length, then two distance lengths of 1)
 * into `clSymbols` with the code-length alphabet (16: repeat the previous 3-6 times, 17: 3-10
 * zeros, 18: 11-138 zeros), counting symbols in `clFreq`. Returns how many.
 */
function runLengths(lengths: Uint8Array): number {
  clFreq.fill(0);
  const all = new Uint8Array(END_OF_BLOCK + 1 + 2);
  all.set(lengths);
  all[END_OF_BLOCK + 1] = 1;
  all[END_OF_BLOCK + 2] = 1;
  let k = 0;
  const put = (sym: number, extra = 0, extraBits = 0) => {
    clSymbols[k++] = sym | (extra << 8) | (extraBits << 16);
    clFreq[sym]!++;
  };
  for (let i = 0; i < all.length;) {
    const len = all[i]!;
    let run = 1;
    while (i + run < all.length && all[i + run] === len) run++;
    i += run;
    if (len === 0) {
      while (run >= 11) {
        const r = Math.min(run, 138);
        put(18, r - 11, 7);
        run -= r;
      }
      if (run >= 3) {
        put(17, run - 3, 3);
        run = 0;
      }
    } else {
      put(len);
      run--;
      while (run >= 3) {
        const r = Math.min(run, 6);
        put(16, r - 3, 2);
        run -= r;
      }
    }
    while (run-- > 0) put(len);
  }
  return k;
}

/**
 * Huffman code lengths of at most `limit` bits for symbols `0..n)` that occur `f[s]` times (0:
 * no code), into `lengths`. At least two symbols get a code (a lone one is paired with another of
 * length 1, so the code is complete, as zlib makes it). Lengths come from a Huffman tree; codes
 * over `limit` are then shortened and the count per length rebalanced to a complete code (miniz's
 * tdefl_huffman_enforce_max_code_size), the most frequent symbols taking the shortest codes.
 */
function codeLengths(f: Uint32Array, n: number, limit: number, lengths: Uint8Array): void {
  lengths.fill(0, 0, n);
  // The used symbols sorted by count, then symbol: one numeric sort of count × 512 + symbol.
  let m = 0;
  for (let s = 0; s < n; s++) if (f[s]! > 0) sortKeys[m++] = f[s]! * 512 + s;
  if (m === 0) sortKeys[m++] = 0; // symbol 0, count 0
  if (m === 1) sortKeys[m++] = sortKeys[0]! % 512 === 0 ? 1 : 0; // symbol 1 (or 0), count 0
  const keys = sortKeys.subarray(0, m).sort();
  // A Huffman tree over the sorted leaves: internal nodes come in ascending weight order, so two
  // queues suffice. parent[] indexes nodes: leaves 0..m-1, internal m..2m-2.
  const weight = treeWeight;
  const parent = treeParent;
  for (let i = 0; i < m; i++) weight[i] = Math.floor(keys[i]! / 512);
  let leaf = 0;
  let inner = m;
  for (let node = m; node < 2 * m - 1; node++) {
    let sum = 0;
    for (let take = 0; take < 2; take++) {
      const pick = leaf < m && (inner >= node || weight[leaf]! <= weight[inner]!) ? leaf++ : inner++;
      parent[pick] = node;
      sum += weight[pick]!;
    }
    weight[node] = sum;
  }
  // Depths, root first (the root is the last node).
  const depth = treeDepth;
  const perLength = lengthCounts.fill(0);
  depth[2 * m - 2] = 0;
  for (let node = 2 * m - 3; node >= 0; node--) depth[node] = depth[parent[node]!]! + 1;
  for (let i = 0; i < m; i++) perLength[Math.min(depth[i]!, limit)]!++;
  // Rebalance: sum of 2^(limit - len) must be exactly 2^limit.
  let total = 0;
  for (let len = limit; len > 0; len--) total += perLength[len]! * 2 ** (limit - len);
  while (total > 2 ** limit) {
    perLength[limit]!--;
    for (let len = limit - 1; len > 0; len--) {
      if (perLength[len]! > 0) {
        perLength[len]!--;
        perLength[len + 1]! += 2;
        break;
      }
    }
    total--;
  }
  // The most frequent symbols (the end of the sorted keys) take the shortest lengths.
  let i = m - 1;
  for (let len = 1; len <= limit; len++) {
    for (let c = perLength[len]!; c > 0; c--) lengths[keys[i--]! % 512] = len;
  }
}

// canonicalCodes' working memory.
const codesPerLength = new Uint16Array(16);
const nextCode = new Uint16Array(16);
// codeLengths' working memory, for up to END_OF_BLOCK + 1 symbols (it runs to the end: no await).
const sortKeys = new Float64Array(END_OF_BLOCK + 1);
const treeWeight = new Float64Array(2 * (END_OF_BLOCK + 1));
const treeParent = new Int32Array(2 * (END_OF_BLOCK + 1));
const treeDepth = new Uint16Array(2 * (END_OF_BLOCK + 1));
const lengthCounts = new Uint32Array(33);

/** Canonical codes for `lengths[0..n)` (RFC 1951, 3.2.2), bit-reversed for an LSB-first writer. */
function canonicalCodes(lengths: Uint8Array, n: number, codes: Uint16Array): void {
  const perLength = codesPerLength.fill(0);
  for (let s = 0; s < n; s++) perLength[lengths[s]!]!++;
  perLength[0] = 0;
  const next = nextCode;
  let code = 0;
  for (let len = 1; len <= 15; len++) {
    code = (code + perLength[len - 1]!) << 1;
    next[len] = code;
  }
  for (let s = 0; s < n; s++) {
    const len = lengths[s]!;
    if (len === 0) continue;
    let c = next[len]!++;
    let r = 0;
    for (let b = 0; b < len; b++) {
      r = (r << 1) | (c & 1);
      c >>>= 1;
    }
    codes[s] = r;
  }
}
