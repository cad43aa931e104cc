import assert from "node:assert/strict";
import { constants, deflateRawSync, inflateRawSync } from "node:zlib";
import { inflateLiterals, LiteralsInflater } from "../../src/format/_inflate_literals.ts";
import { assertSameBytes, prng } from "../_util.ts";
import { exponentPlane, skewedPlane } from "./_planes.ts";

const HUFFMAN_ONLY = { strategy: constants.Z_HUFFMAN_ONLY };

/** What zlib makes of `packed` when it inflates to `size` bytes: the bytes, or undefined. */
function zlibInflate(packed: Uint8Array, size: number): Uint8Array | undefined {
  try {
    const out = inflateRawSync(packed, { maxOutputLength: Math.max(size, 1) });
    return out.byteLength === size ? new Uint8Array(out) : undefined;
  } catch {
    return undefined;
  }
}

function roundTrip(plane: Uint8Array, what: string): Uint8Array {
  const packed = deflateRawSync(plane, HUFFMAN_ONLY);
  const out = new Uint8Array(plane.byteLength);
  assert.equal(inflateLiterals(packed, out), true, what);
  assertSameBytes(out, plane, what);
  return packed;
}

/**
 * A hand encoder's bit writer, appending to `bytes`: `put` writes a value's low bits first (header
 * fields, extra bits), `putCode` a Huffman code's bits most significant first, `end` the last byte.
 */
function bitWriter(bytes: number[]) {
  let acc = 0;
  let n = 0;
  const put = (value: number, len: number) => {
    acc |= value << n;
    n += len;
    while (n >= 8) {
      bytes.push(acc & 255);
      acc >>>= 8;
      n -= 8;
    }
  };
  const putCode = (code: number, len: number) => {
    for (let i = len - 1; i >= 0; i--) put((code >> i) & 1, 1);
  };
  const end = () => {
    if (n > 0) bytes.push(acc);
    return Uint8Array.from(bytes);
  };
  return { put, putCode, end };
}

Deno.test("inflateLiterals: Huffman-only deflate of exponent, skewed, random and constant planes, at every tail length", () => {
  // 16 Ki symbols make a zlib block: sizes around that and the fast loop's 4- and 8-byte margins.
  for (const n of [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 16383, 16384, 16385, 70_001, 1 << 20]) {
    roundTrip(exponentPlane(n, n), `exponent plane of ${n}`);
    roundTrip(new Uint8Array(n).fill(0x3c), `constant plane of ${n}`); // one literal and end of block
  }
  // Around 16 KiB: a block with less output left than that is decoded one symbol per lookup
  // (32_868: two blocks with the table of up to four literals per lookup, then one of 100 without).
  for (const n of [1000, 16_383, 16_385, 32_868, 65_536, 300_000]) {
    const packed = roundTrip(skewedPlane(n, n), `skewed plane of ${n}`);
    assert.ok(packed.byteLength < n / 2, "codes of many lengths, most short");
    // Random bytes: zlib stores the blocks that would not shrink.
    const random = new Uint8Array(n);
    crypto.getRandomValues(random.subarray(0, Math.min(n, 65_536)));
    if (n > 65_536) random.set(exponentPlane(n - 65_536, 9), 65_536); // stored, then Huffman blocks
    roundTrip(random, `random then exponent plane of ${n}`);
  }
});

Deno.test("inflateLiterals: a long code of one block is no code in the next", () => {
  // Block 1: zlib's Huffman-only deflate of a skewed plane (the last of its blocks has codes of 13
  // bits and more), closed by a sync flush (an empty stored block), so the stream goes on.
  const plane = skewedPlane(20_000, 3);
  const first = new Uint8Array(deflateRawSync(plane, { ...HUFFMAN_ONLY, finishFlush: constants.Z_SYNC_FLUSH }));
  // Block 2, hand-encoded and final: a lone one-bit code, for the end of block only, then k ones
  // (no code in this block: zlib refuses the stream) and the end of block. A table entry left from
  // block 1 would decode some k ones and a zero as one of its long codes' literals.
  const withSecond = (ones: number): Uint8Array => {
    const { put, putCode, end } = bitWriter(Array.from(first));
    put(1, 1); // final
    put(2, 2); // dynamic
    put(0, 5); // 257 literal/length codes
    put(0, 5); // 1 distance code
    put(18 - 4, 4); // 18 code-length code lengths, in their order: 18 gets 1 bit, 0 and 1 get 2
    const order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1];
    for (const sym of order) put(sym === 18 ? 1 : sym === 0 || sym === 1 ? 2 : 0, 3);
    // Codes: 18 is 0, 0 is 10, 1 is 11. 256 zeros (138 + 118), a 1 for end of block, a 0 distance.
    putCode(0, 1);
    put(138 - 11, 7);
    putCode(0, 1);
    put(118 - 11, 7);
    putCode(0b11, 2);
    putCode(0b10, 2);
    putCode(2 ** ones - 1, ones);
    putCode(0, 1); // end of block
    return end();
  };
  for (let ones = 1; ones <= 15; ones++) {
    const stream = withSecond(ones);
    assert.equal(zlibInflate(stream, plane.byteLength + 1), undefined, `${ones} ones: zlib refuses it`);
    assert.equal(inflateLiterals(stream, new Uint8Array(plane.byteLength + 1)), false, `${ones} ones`);
  }
  // Block 1 alone (ended by a final empty block) decodes.
  const out = new Uint8Array(plane.byteLength);
  assert.equal(inflateLiterals(Uint8Array.from([...first, 3, 0]), out), true);
  assertSameBytes(out, plane, "block 1");
});

Deno.test("inflateLiterals: a fixed-code block of literals (hand-encoded: zlib writes none without matches)", () => {
  const data = Uint8Array.from({ length: 300 }, (_, i) => (i * 37) & 255);
  const { put, putCode, end } = bitWriter([]);
  put(1, 1); // final
  put(1, 2); // fixed codes
  for (const b of data) b < 144 ? putCode(0x30 + b, 8) : putCode(0x190 + b - 144, 9);
  putCode(0, 7); // end of block
  const packed = end();
  assert.deepEqual(zlibInflate(packed, data.byteLength), data, "a valid stream");
  const out = new Uint8Array(data.byteLength);
  assert.equal(inflateLiterals(packed, out), true);
  assert.deepEqual(out, data);
});

Deno.test("inflateLiterals: false for matches, a wrong output size, trailing bytes and truncation (the caller's inflater decides)", () => {
  const plane = exponentPlane(50_000, 3);
  const packed = deflateRawSync(plane, HUFFMAN_ONLY);
  const check = (input: Uint8Array, size: number) => inflateLiterals(input, new Uint8Array(size));
  assert.equal(check(deflateRawSync(plane), plane.byteLength), false, "level 6 writes matches");
  assert.equal(check(deflateRawSync(new Uint8Array(5000)), 5000), false, "a run of zeros is a match");
  assert.equal(check(packed, plane.byteLength - 1), false, "one byte too many");
  assert.equal(check(packed, plane.byteLength + 1), false, "one byte short");
  assert.equal(check(Uint8Array.of(...packed, 0), plane.byteLength), false, "a byte after the final block");
  for (const cut of [0, 1, 2, 10, 100, packed.byteLength >> 1, packed.byteLength - 1]) {
    assert.equal(check(packed.subarray(0, cut), plane.byteLength), false, `cut at ${cut}`);
  }
});

Deno.test("inflateLiterals: on damaged streams it either gives up or agrees with zlib byte for byte", () => {
  const rand = prng(11);
  const sources = [exponentPlane(40_000, 5), skewedPlane(20_000, 6), new Uint8Array(3000).fill(7)];
  let agreed = 0;
  let gaveUp = 0;
  for (let trial = 0; trial < 3000; trial++) {
    const plane = sources[trial % sources.length]!;
    const packed = deflateRawSync(plane, HUFFMAN_ONLY);
    const damaged = packed.slice();
    // Mostly in the block headers and tables, where a slip matters most.
    const flips = 1 + Math.floor(rand() * 3);
    for (let f = 0; f < flips; f++) {
      const at = rand() < 0.6
        ? Math.floor(rand() * Math.min(80, damaged.byteLength))
        : Math.floor(rand() * damaged.byteLength);
      damaged[at]! ^= 1 << Math.floor(rand() * 8);
    }
    const out = new Uint8Array(plane.byteLength);
    if (inflateLiterals(damaged, out)) {
      const zlib = zlibInflate(damaged, plane.byteLength);
      const what = `trial ${trial}: accepted what zlib does not agree with`;
      assert.ok(zlib, `${what} (zlib refuses it)`);
      assertSameBytes(out, zlib, what);
      agreed++;
    } else gaveUp++;
  }
  // Both outcomes happen: a flip in the data changes the bytes and zlib agrees, a flip in a table
  // usually breaks it.
  assert.ok(agreed > 100 && gaveUp > 100, `agreed ${agreed}, gave up ${gaveUp}`);
});

Deno.test("LiteralsInflater: fills a block at a time to at least the target, interleaved with another, and is finished only at the final block with no input left", () => {
  // Two planes with different codes, in zlib's 16 Ki-symbol blocks: each fill rebuilds its tables.
  const planes = [exponentPlane(100_000, 1), skewedPlane(90_000, 2)];
  const packed = planes.map((p) => deflateRawSync(p, HUFFMAN_ONLY));
  const outs = planes.map((p) => new Uint8Array(p.byteLength));
  const inflaters = packed.map((b, i) => new LiteralsInflater(b, outs[i]!));
  for (let target = 1; target < 100_000; target += 7_919) {
    inflaters.forEach((inf, i) => {
      const size = planes[i]!.byteLength;
      assert.equal(inf.fill(Math.min(target, size)), true);
      // Whole blocks: at least the target, less than a block past it (or all of it).
      assert.ok(inf.written >= Math.min(target, size) && inf.written < Math.min(target, size) + 16_385);
      assertSameBytes(outs[i]!.subarray(0, inf.written), planes[i]!.subarray(0, inf.written), `plane ${i}`);
      assert.equal(inf.finished, inf.written === size);
    });
  }
  inflaters.forEach((inf, i) => {
    assert.equal(inf.fill(), true);
    assert.equal(inf.finished, true);
    assertSameBytes(outs[i]!, planes[i]!, `plane ${i}`);
  });
  // A byte after the final block: every block decodes, the stream is not finished.
  const trailing = new LiteralsInflater(Uint8Array.from([...packed[0]!, 0]), new Uint8Array(100_000));
  assert.equal(trailing.fill(), true);
  assert.equal(trailing.finished, false);
  // A refused block stays refused.
  const refused = new LiteralsInflater(deflateRawSync(planes[0]!), new Uint8Array(100_000));
  assert.equal(refused.fill(), false);
  assert.equal(refused.fill(), false);
  assert.equal(refused.finished, false);
});
