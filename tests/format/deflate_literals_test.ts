import assert from "node:assert/strict";
import { constants, deflateRawSync, inflateRawSync } from "node:zlib";
import {
  blockCounts,
  deflateBound,
  deflateLiterals,
  LITERALS_BLOCK_BYTES,
  planLiterals,
  writeLiterals,
} from "../../src/format/_deflate_literals.ts";
import { inflateLiterals } from "../../src/format/_inflate_literals.ts";
import { exponentPlane, skewedPlane } from "./_planes.ts";
import { assertSameBytes, prng } from "../_util.ts";

/** Inflated by zlib, by DecompressionStream and by our own decoder: all three must give `plane`. */
async function assertReadable(packed: Uint8Array, plane: Uint8Array, what: string): Promise<void> {
  assertSameBytes(new Uint8Array(inflateRawSync(packed)), plane, `${what}: node:zlib`);
  const web = await new Response(
    ReadableStream.from([packed]).pipeThrough(
      new DecompressionStream("deflate-raw") as ReadableWritablePair<Uint8Array, Uint8Array>,
    ),
  ).arrayBuffer();
  assertSameBytes(new Uint8Array(web), plane, `${what}: DecompressionStream`);
  const out = new Uint8Array(plane.byteLength);
  assert.equal(inflateLiterals(packed, out), true, `${what}: literals only`);
  assertSameBytes(out, plane, `${what}: inflateLiterals`);
}

Deno.test("deflateLiterals: every inflater reads it back, at block, stored-block and tail boundaries", async () => {
  const block = 256 * 1024;
  for (const n of [0, 1, 2, 3, 5, 8, 1000, 65_535, 65_536, block - 1, block, block + 1, 3 * block + 7]) {
    await assertReadable(deflateLiterals(exponentPlane(n, n)), exponentPlane(n, n), `exponent plane of ${n}`);
  }
  for (const n of [1, 2, 100_000]) {
    await assertReadable(deflateLiterals(new Uint8Array(n).fill(0x3c)), new Uint8Array(n).fill(0x3c), `constant ${n}`);
  }
  const skewed = skewedPlane(600_000, 4);
  await assertReadable(deflateLiterals(skewed), skewed, "skewed plane (lengths cut to 12 bits)");
  // The same bytes sorted (rarest last, in one 256 KiB block): codes of the longest length one
  // after another, two of which must fit in the bit buffer at once.
  const sorted = skewedPlane(250_000, 5).sort();
  await assertReadable(deflateLiterals(sorted), sorted, "longest codes in a row");
  // Random bytes are stored (coding would not shrink them), a block's worth then coded blocks.
  const mixed = exponentPlane(block * 2, 5);
  crypto.getRandomValues(mixed.subarray(0, 65_536));
  mixed.set(mixed.subarray(0, 65_536), 65_536);
  crypto.getRandomValues(mixed.subarray(131_072, 196_608));
  const packed = deflateLiterals(mixed);
  await assertReadable(packed, mixed, "random then exponent bytes");
  assert.ok(packed.byteLength < 0.75 * mixed.byteLength);
  // Any alignment: a view one byte into a buffer takes the byte-at-a-time paths.
  const odd = new Uint8Array(100_001);
  odd.set(exponentPlane(100_000, 6), 1);
  await assertReadable(deflateLiterals(odd.subarray(1)), odd.subarray(1), "unaligned view");
});

Deno.test("deflateLiterals: blocks of up to 128 byte values and of more, and blocks whose values change", async () => {
  // Block by block (256 KiB each): 128 values (coded through the pair table), 129 values (two
  // lookups a step), 128 other values (the pair table holds the first block's entries too), then
  // 2 values. Each is mostly one value, so every block is coded, not stored.
  const block = 256 * 1024;
  const rand = prng(9);
  const plane = new Uint8Array(4 * block);
  const fill = (at: number, values: number[]) => {
    for (let i = 0; i < block; i++) {
      plane[at + i] = rand() < 0.7 ? values[0]! : values[1 + Math.floor(rand() * (values.length - 1))]!;
    }
    plane.set(values, at); // every value present
  };
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
  fill(0, range(0, 128));
  fill(block, range(0, 129));
  fill(2 * block, range(128, 128).reverse());
  fill(3 * block, [7, 200]);
  const packed = deflateLiterals(plane);
  assert.ok(packed.byteLength < 0.75 * plane.byteLength, `${packed.byteLength} bytes: coded, not stored`);
  await assertReadable(packed, plane, "blocks of 128, 129, 128 other and 2 values");
});

Deno.test("deflateLiterals: within 0.5% of zlib's Huffman-only size on exponent planes, never larger than stored", () => {
  for (const n of [4096, 1 << 20]) {
    const plane = exponentPlane(n, 7);
    const ours = deflateLiterals(plane).byteLength;
    const zlib = deflateRawSync(plane, { strategy: constants.Z_HUFFMAN_ONLY }).byteLength;
    assert.ok(ours < 1.005 * zlib, `${ours} bytes against zlib's ${zlib} for ${n}`);
  }
  const random = new Uint8Array(300_000);
  for (let i = 0; i < random.length; i += 65_536) crypto.getRandomValues(random.subarray(i, i + 65_536));
  const packed = deflateLiterals(random);
  assert.ok(packed.byteLength <= deflateBound(random.byteLength));
  assert.ok(packed.byteLength < 1.0002 * random.byteLength, `${packed.byteLength} bytes`); // stored blocks' headers
  assertSameBytes(new Uint8Array(inflateRawSync(packed)), random, "stored blocks");
});

Deno.test("deflateLiterals: writes into the caller's buffer, and refuses one under the bound", () => {
  const plane = exponentPlane(10_000, 8);
  const out = new Uint8Array(deflateBound(plane.byteLength));
  const packed = deflateLiterals(plane, out);
  assert.equal(packed.buffer, out.buffer);
  assert.deepEqual(packed, deflateLiterals(plane), "the same bytes either way");
  assert.throws(() => deflateLiterals(plane, out.subarray(1)), RangeError);
});

Deno.test("planLiterals: the size planned from byte counts alone is the size written, at every block and stored-block boundary", () => {
  const rand = prng(11);
  const B = LITERALS_BLOCK_BYTES;
  for (const n of [0, 1, 2, 65_535, 65_536, B - 1, B, B + 1, 2 * B + 65_537, 3 * B + 5]) {
    // Blocks that code well, blocks of random bytes (stored), and both in one plane.
    const planes = {
      exponents: exponentPlane(n, n + 1),
      random: Uint8Array.from({ length: n }, () => rand() * 256),
      mixed: Uint8Array.from({ length: n }, (_, i) => (Math.floor(i / B) % 2 ? rand() * 256 : 0x3c + (i % 3))),
    };
    for (const [kind, plane] of Object.entries(planes)) {
      const plan = planLiterals(n, blockCounts(plane));
      const packed = writeLiterals(plan, plane);
      assert.equal(packed.byteLength, plan.byteLength, `${kind}, ${n} bytes`);
      assert.deepEqual(packed, deflateLiterals(plane), `${kind}, ${n} bytes: deflateLiterals' bytes`);
      assertSameBytes(new Uint8Array(inflateRawSync(packed)), plane, `${kind}, ${n} bytes`);
    }
  }
});

Deno.test("planLiterals and writeLiterals refuse counts and bytes that do not match the plan", () => {
  const plane = exponentPlane(1000, 3);
  const counts = blockCounts(plane);
  assert.throws(() => planLiterals(999, counts), /block 0 counts 1000 bytes, holds 999/);
  const plan = planLiterals(1000, counts);
  assert.throws(() => writeLiterals(plan, plane.subarray(1)), /999 bytes, the plan is for 1000/);
  assert.throws(() => writeLiterals(plan, plane, new Uint8Array(100)), /needs/);
  // Other bytes of the same length: codes planned for values that are not there (or none for
  // values that are) give another size, which writeLiterals reports instead of returning it.
  const other = plane.map((b) => b ^ 0x80);
  assert.throws(() => writeLiterals(plan, other), /other bytes than planned/);
});
