// A fast path for inflating byte planes: raw deflate (RFC 1951) streams whose blocks hold only
// literals, which is what a Huffman-only deflate writes (src/format/_deflate_literals.ts, and
// node:zlib and pako with Z_HUFFMAN_ONLY, which wrote planes before 2026-12-04). An exponent plane codes in about 2.7 bits per byte, so one lookup of
// TABLE_BITS bits decodes up to four bytes at once (the multi-symbol tables of zstd's and
// libdeflate's Huffman decoders); zlib's inflate decodes one symbol per lookup and writes into
// fresh memory. A stream with anything else (a match, a malformed table, a wrong length, trailing
// bytes) makes it return false, and the caller inflates with the runtime's general inflater,
// which also words the error. Everything it allocates is fixed-size; input values only index
// tables of fixed size or are checked first.

/**
 * Bits per table lookup: 4096 entries, rebuilt per block (ours hold 256 KiB, zlib's 16 Ki symbols),
 * so every code ckpt writes (at most 12 bits) is in it. Per 8 MiB plane, 12 against 10 bits: a
 * float32 exponent plane 8.8 against 9.4 ms, a float16 top plane 17.4 against 22.1, a Zipf-like
 * plane 10.9 against 18.7; zlib's blocks (written before 2026-12-04) even, 27.2 against 27.1.
 */
const TABLE_BITS = 12;
const TABLE_MASK = (1 << TABLE_BITS) - 1;
/** Longest code deflate allows. */
const MAX_BITS = 15;
/** Order in which a dynamic block lists its code-length code lengths (RFC 1951, 3.2.7). */
const CODE_LENGTH_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
const END_OF_BLOCK = 256;

/** A canonical Huffman code: per-length counts and the symbols in code order (puff.c's decoding). */
class Code {
  readonly count = new Uint16Array(MAX_BITS + 1);
  readonly symbol: Uint16Array;
  /** Each symbol's code, bit-reversed (deflate sends codes most significant bit first). */
  readonly reversed: Uint16Array;
  #offs = new Uint16Array(MAX_BITS + 2);

  constructor(symbols: number) {
    this.symbol = new Uint16Array(symbols);
    this.reversed = new Uint16Array(symbols);
  }

  /**
   * Builds the code for `lengths[0..n)`; false for a set zlib would refuse: over-subscribed, or
   * incomplete, except a lone code of one bit where `lone` allows it (literal/length and distance
   * codes) or no codes at all where `empty` does (distance codes of a block without matches).
   */
  build(lengths: Uint8Array, n: number, lone: boolean, empty: boolean): boolean {
    const count = this.count;
    count.fill(0);
    for (let i = 0; i < n; i++) count[lengths[i]!]!++;
    count[0] = 0;
    let left = 1;
    let used = 0;
    for (let len = 1; len <= MAX_BITS; len++) {
      left = (left << 1) - count[len]!;
      if (left < 0) return false;
      used += count[len]!;
    }
    if (used === 0) return empty;
    if (left > 0 && !(lone && used === 1 && count[1] === 1)) return false;
    const offs = this.#offs;
    offs[1] = 0;
    for (let len = 1; len <= MAX_BITS; len++) offs[len + 1] = offs[len]! + count[len]!;
    let code = 0;
    const next = new Uint16Array(MAX_BITS + 1);
    for (let len = 1; len <= MAX_BITS; len++) {
      code = (code + count[len - 1]!) << 1;
      next[len] = code;
    }
    for (let s = 0; s < n; s++) {
      const len = lengths[s]!;
      if (len === 0) continue;
      this.symbol[offs[len]!++] = s;
      this.reversed[s] = reverse(next[len]!++, len);
    }
    return true;
  }
}

/** `code`'s low `len` bits in reverse order. */
function reverse(code: number, len: number): number {
  let r = 0;
  for (let i = 0; i < len; i++) {
    r = (r << 1) | (code & 1);
    code >>>= 1;
  }
  return r;
}

/** Bit reader state between blocks (whole bytes only are consumed from `pos`; `bits` below). */
class Bits {
  pos = 0;
  buf = 0;
  cnt = 0;
  constructor(readonly src: Uint8Array) {}

  /**
   * Takes over a fast loop's reader: the whole bytes it read ahead of its `cnt` valid bits go
   * back to the input, and the bits above them are dropped.
   */
  settle(pos: number, buf: number, cnt: number): void {
    this.pos = pos - (cnt >> 3);
    this.cnt = cnt & 7;
    this.buf = buf & ((1 << this.cnt) - 1);
  }

  /** The next `n` bits (n ≤ 16), or -1 past the end of the input. */
  take(n: number): number {
    while (this.cnt < n) {
      if (this.pos >= this.src.length) return -1;
      this.buf |= this.src[this.pos++]! << this.cnt;
      this.cnt += 8;
    }
    const v = this.buf & ((1 << n) - 1);
    this.buf >>>= n;
    this.cnt -= n;
    return v;
  }
}

// Tables, rebuilt for every block (a block is decoded within one call: no await inside).
const lengths = new Uint8Array(288 + 32);
const literals = new Code(288);
const distances = new Code(32);
const codeLengths = new Code(19);
/** One symbol per TABLE_BITS-bit prefix: symbol | length << 9, or 0 for a longer code. */
const single = new Int32Array(1 << TABLE_BITS);
/** Up to four literals per prefix, little-endian, and their count and bits in `multiMeta`. */
const multi = new Int32Array(1 << TABLE_BITS);
/** bits | count << 4 for `multi`; 0 where the prefix starts with a non-literal or a long code. */
const multiMeta = new Uint8Array(1 << TABLE_BITS);
/**
 * The codes longer than TABLE_BITS (zlib writes up to 15 bits), by their first MAX_BITS bits:
 * symbol | length << 9, or 0. Decoded a bit at a time, as before, a Zipf-like plane took 32.5
 * against 18.5 ms per 8 MiB (with 10-bit tables).
 */
const long = new Int32Array(1 << MAX_BITS);
const LONG_MASK = (1 << MAX_BITS) - 1;
/** The long codes written into `long` for the current block (reversed code | length << 16), to clear. */
const longCodes = new Int32Array(288);
let longCount = 0;

/**
 * Inflates the raw deflate stream `src` into exactly `out.byteLength` bytes of `out`, when it is
 * made of stored blocks and Huffman-coded blocks of literals only and is well formed. Returns
 * false, with `out` partly written, for anything else (a match, a table or length zlib would
 * refuse, output longer or shorter than `out`, bytes after the final block): the caller then
 * inflates with a general inflater. Writes only inside `out`.
 *
 * @example
 * ```ts
 * import { inflateLiterals } from "./_inflate_literals.ts";
 * import { deflateRawSync } from "node:zlib";
 * import assert from "node:assert/strict";
 * const plane = new Uint8Array(1000).map((_, i) => 0x3c + (i % 3));
 * const packed = deflateRawSync(plane, { strategy: 2 }); // Z_HUFFMAN_ONLY: literals only
 * const out = new Uint8Array(plane.byteLength);
 * assert.equal(inflateLiterals(packed, out), true);
 * assert.deepEqual(out, plane);
 * assert.equal(inflateLiterals(deflateRawSync(plane), out), false); // level 6 writes matches
 * ```
 */
export function inflateLiterals(src: Uint8Array, out: Uint8Array): boolean {
  const inflater = new LiteralsInflater(src, out);
  return inflater.fill() && inflater.finished;
}

/**
 * {@linkcode inflateLiterals} a block at a time: {@linkcode LiteralsInflater.fill} decodes whole
 * blocks until at least a given number of bytes of `out` are written, so a caller can use the
 * first bytes of a plane (interleave them, hash them) before the rest is inflated. Several may be
 * interleaved (the tables are rebuilt for every block, and a block is decoded within one call).
 * Same checks as {@linkcode inflateLiterals}: once a call returned false, the stream is not one
 * this decoder takes, and `out` is partly written.
 *
 * @example
 * ```ts
 * import { LiteralsInflater } from "./_inflate_literals.ts";
 * import { deflateRawSync } from "node:zlib";
 * import assert from "node:assert/strict";
 * const plane = new Uint8Array(100_000).map((_, i) => 0x3c + (i % 3));
 * // Z_HUFFMAN_ONLY, 16 KiB chunks: several blocks.
 * const packed = deflateRawSync(plane, { strategy: 2, chunkSize: 16384 });
 * const out = new Uint8Array(plane.byteLength);
 * const inflater = new LiteralsInflater(packed, out);
 * assert.equal(inflater.fill(1000), true);
 * assert.ok(inflater.written >= 1000 && inflater.written < plane.byteLength);
 * assert.deepEqual(out.subarray(0, inflater.written), plane.subarray(0, inflater.written));
 * assert.equal(inflater.fill(), true); // to the final block
 * assert.equal(inflater.finished, true);
 * assert.deepEqual(out, plane);
 * ```
 */
export class LiteralsInflater {
  #bits: Bits;
  #out: Uint8Array;
  #o = 0;
  #final = false;
  #failed = false;

  /** Inflates `src` into `out`, which it must fill exactly. */
  constructor(src: Uint8Array, out: Uint8Array) {
    this.#bits = new Bits(src);
    this.#out = out;
  }

  /** Bytes of `out` written so far (all of them correct, unless a call returned false). */
  get written(): number {
    return this.#o;
  }

  /** Whether the final block is decoded, `out` is full and no input is left. */
  get finished(): boolean {
    return !this.#failed && this.#final && this.#o === this.#out.byteLength &&
      this.#bits.pos === this.#bits.src.length;
  }

  /**
   * Decodes blocks until at least `target` bytes are written (by default: to the final block)
   * or the final block is decoded; false for a stream this decoder does not take (then and from
   * then on).
   */
  fill(target = Infinity): boolean {
    if (this.#failed) return false;
    const bits = this.#bits;
    const src = bits.src;
    const out = this.#out;
    const size = out.byteLength;
    let o = this.#o;
    while (o < target && !this.#final) {
      const final = bits.take(1);
      const type = bits.take(2);
      if (type === 0) {
        // Stored: to the byte boundary (the reader holds no whole bytes between blocks), then LEN, NLEN.
        bits.buf = 0;
        bits.cnt = 0;
        const at = bits.pos;
        if (at + 4 > src.length) return this.#fail();
        const len = src[at]! | (src[at + 1]! << 8);
        if ((src[at + 2]! | (src[at + 3]! << 8)) !== (len ^ 0xffff)) return this.#fail();
        if (at + 4 + len > src.length || o + len > size) return this.#fail();
        out.set(src.subarray(at + 4, at + 4 + len), o);
        o += len;
        bits.pos = at + 4 + len;
      } else if (type === 1 || type === 2) {
        const n = type === 1 ? fixedLengths() : dynamicLengths(bits);
        // The multi-literal table (4096 entries to fill) pays only for a block that can be long.
        const multiple = size - o >= MULTI_MIN;
        if (n < 0 || !buildTables(n, multiple)) return this.#fail();
        o = decodeBlock(bits, out, o, size, multiple);
        if (o < 0) return this.#fail();
      } else return this.#fail();
      this.#o = o;
      if (final === 1) this.#final = true;
    }
    return true;
  }

  #fail(): false {
    this.#failed = true;
    return false;
  }
}

/** The fixed code's lengths (RFC 1951, 3.2.6): 288 literal/length symbols (distances are never used). */
function fixedLengths(): number {
  lengths.fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280, 288);
  return 288;
}

/** Reads a dynamic block's code lengths into `lengths`; the number of literal/length codes, or -1. */
function dynamicLengths(bits: Bits): number {
  const hlit = bits.take(5) + 257;
  const hdist = bits.take(5) + 1;
  const hclen = bits.take(4) + 4;
  if (hlit < 257 || hdist < 1 || hclen < 4) return -1; // the input ended
  if (hlit > 286 || hdist > 30) return -1;
  lengths.fill(0, 0, 19);
  for (let i = 0; i < hclen; i++) {
    const len = bits.take(3);
    if (len < 0) return -1;
    lengths[CODE_LENGTH_ORDER[i]!] = len;
  }
  if (!codeLengths.build(lengths, 19, false, false)) return -1;
  const total = hlit + hdist;
  const all = new Uint8Array(total);
  for (let i = 0; i < total;) {
    const sym = slowSymbol(bits, codeLengths);
    if (sym < 0) return -1;
    if (sym < 16) {
      all[i++] = sym;
      continue;
    }
    if (sym === 16 && i === 0) return -1;
    const value = sym === 16 ? all[i - 1]! : 0;
    const extra = bits.take(sym === 16 ? 2 : sym === 17 ? 3 : 7);
    if (extra < 0) return -1;
    const repeat = (sym === 18 ? 11 : 3) + extra;
    if (i + repeat > total) return -1;
    all.fill(value, i, i + repeat);
    i += repeat;
  }
  if (all[END_OF_BLOCK] === 0) return -1;
  // Distance codes are never used here (a match makes the decode give up), but a set zlib would
  // refuse must not be accepted.
  if (!distances.build(all.subarray(hlit), hdist, true, true)) return -1;
  lengths.set(all.subarray(0, hlit));
  return hlit;
}

/** One symbol of `code`, a bit at a time (puff.c): -1 for an invalid code or the end of the input. */
function slowSymbol(bits: Bits, code: Code): number {
  let value = 0;
  let first = 0;
  let index = 0;
  for (let len = 1; len <= MAX_BITS; len++) {
    const bit = bits.take(1);
    if (bit < 0) return -1;
    value |= bit;
    const count = code.count[len]!;
    if (value - count < first) return code.symbol[index + (value - first)]!;
    index += count;
    first = (first + count) << 1;
    value <<= 1;
  }
  return -1;
}

/**
 * Blocks with less output than this left to them are decoded one symbol per lookup, without
 * filling the multi-literal table: for a tensor of 1024 float32 values (one 1 KiB plane), filling
 * it took most of the decoding (24 byte-grouped tensors of up to 8 KiB: 2.10 ms against 0.87 for
 * the same tensors raw).
 */
const MULTI_MIN = 16 * 1024;

/**
 * The literal/length code of `lengths[0..n)` and its lookup tables (the multi-literal one only
 * with `multiple`); false for a refused set.
 */
function buildTables(n: number, multiple: boolean): boolean {
  if (!literals.build(lengths, n, true, false)) return false;
  single.fill(0);
  // The last block's long codes out, this one's in: only their share of the table is written.
  for (let i = 0; i < longCount; i++) {
    const c = longCodes[i]!;
    for (let x = c & 0xffff; x <= LONG_MASK; x += 1 << (c >>> 16)) long[x] = 0;
  }
  longCount = 0;
  for (let s = 0; s < n; s++) {
    const len = lengths[s]!;
    if (len === 0) continue;
    const entry = s | (len << 9);
    const code = literals.reversed[s]!;
    if (len > TABLE_BITS) {
      longCodes[longCount++] = code | (len << 16);
      for (let x = code; x <= LONG_MASK; x += 1 << len) long[x] = entry;
      continue;
    }
    for (let x = code; x <= TABLE_MASK; x += 1 << len) single[x] = entry;
  }
  if (!multiple) return true;
  // Greedily, the literals whose codes fit one after another in each prefix (at most four).
  for (let x = 0; x <= TABLE_MASK; x++) {
    let used = 0;
    let count = 0;
    let packed = 0;
    let entry = single[x]!;
    while (count < 4 && entry !== 0) {
      const sym = entry & 511;
      const len = entry >>> 9;
      if (sym > 255 || used + len > TABLE_BITS) break;
      packed |= sym << (8 * count);
      count++;
      used += len;
      entry = single[x >>> used]!; // only trusted while its length fits in the bits left (above)
    }
    multi[x] = packed;
    multiMeta[x] = used | (count << 4);
  }
  return true;
}

/**
 * Decodes one Huffman-coded block into `out` from `o`: the new output position, or -1 (a match,
 * an invalid code, too much output, the end of the input). The bit buffer holds `cnt` valid bits
 * in an int32; the fast loop refills it a word at a time without branching on how much it
 * needs (consuming whole bytes only) and then takes two lookups of TABLE_BITS bits.
 */
function decodeBlock(bits: Bits, out: Uint8Array, o: number, size: number, multiple: boolean): number {
  const src = bits.src;
  const end = src.length;
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  const ov = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let pos = bits.pos;
  let buf = bits.buf | 0;
  let cnt = bits.cnt;
  // Without the multi-literal table (see MULTI_MIN), never the fast loop.
  const fastIn = multiple ? end - 4 : -1;
  const fastOut = size - 8;
  for (;;) {
    if (pos <= fastIn && o <= fastOut) {
      buf |= view.getUint32(pos, true) << cnt;
      pos += (31 - cnt) >> 3;
      cnt |= 24;
      let x = buf & TABLE_MASK;
      let m = multiMeta[x]!;
      if (m !== 0) {
        // Up to four bytes in one unaligned store (the bytes past the count are overwritten next;
        // `fastOut` leaves room): 20% faster than four byte stores on 8 MiB planes here.
        let p = multi[x]!;
        ov.setUint32(o, p, true);
        o += m >> 4;
        buf = (buf >>> (m & 15)) | 0;
        cnt -= m & 15;
        // The same again, written out: 24 bits or more hold two lookups (as a loop of two it ran
        // 5-8% slower here with 10-bit tables, 3-5% with 12-bit ones).
        x = buf & TABLE_MASK;
        m = multiMeta[x]!;
        if (m !== 0) {
          p = multi[x]!;
          ov.setUint32(o, p, true);
          o += m >> 4;
          buf = (buf >>> (m & 15)) | 0;
          cnt -= m & 15;
          continue;
        }
      }
    } else {
      while (cnt < 24 && pos < end) {
        buf |= src[pos++]! << cnt;
        cnt += 8;
      }
    }
    // One symbol: a long code, the end of the block, a match, or near the end of input or output.
    let sym: number;
    let entry = single[buf & TABLE_MASK]!;
    if (entry === 0) {
      // A long code takes up to MAX_BITS bits, more than the fast loop leaves: refill first, unless
      // the input ends (the bits above `cnt` are either the next input bits, ORed in again, or zero).
      while (cnt < 24 && pos < end) {
        buf |= src[pos++]! << cnt;
        cnt += 8;
      }
      entry = long[buf & LONG_MASK]!;
    }
    if (entry !== 0) {
      const len = entry >>> 9;
      if (len > cnt) return -1;
      sym = entry & 511;
      buf = (buf >>> len) | 0;
      cnt -= len;
    } else {
      bits.settle(pos, buf, cnt);
      sym = slowSymbol(bits, literals);
      pos = bits.pos;
      buf = bits.buf | 0;
      cnt = bits.cnt;
    }
    if (sym < 0) return -1;
    if (sym < END_OF_BLOCK) {
      if (o >= size) return -1;
      out[o++] = sym;
    } else if (sym === END_OF_BLOCK) break;
    else return -1; // a length code (or an invalid one), a match: not this path's business
  }
  bits.settle(pos, buf, cnt);
  return o;
}
