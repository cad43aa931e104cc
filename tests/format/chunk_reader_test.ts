// The chunk reader every decoder pulls bytes through, fed in chunks of every size.
import assert from "node:assert/strict";
import { ChunkReader, HASH_PIECE } from "../../src/format/_chunk_reader.ts";
import { sha256 } from "../../src/format/_hash.ts";
import { prng } from "../_util.ts";

function* chunks(bytes: Uint8Array, size: number): Generator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

async function* from(it: Iterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  yield* it;
}

function random(n: number, seed: number): Uint8Array {
  const rand = prng(seed);
  return Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
}

Deno.test("ChunkReader.readExact returns the same bytes for every chunk size, reads spanning many chunks", async () => {
  const bytes = random(70_000, 1);
  const reads = [1, 7, 64, 65_536, 4_392];
  for (const size of [1, 3, 16, 1024, 70_000]) {
    const r = new ChunkReader(from(chunks(bytes, size)));
    let at = 0;
    for (const n of reads) {
      assert.deepEqual(await r.readExact(n, "x"), bytes.subarray(at, at + n), `chunk ${size}, read ${n}`);
      at += n;
    }
    assert.equal(r.position, at);
    assert.ok(await r.atEnd());
  }
});

Deno.test("ChunkReader.readLine finds a 64 KiB line fed one byte per chunk, and the lines after it", async () => {
  const long = new Uint8Array(65_536).fill(0x61);
  long[long.length - 1] = 0x0a;
  const bytes = new Uint8Array([...long, 0x62, 0x0a, 0x0a]);
  for (const size of [1, 5, 4096]) {
    const r = new ChunkReader(from(chunks(bytes, size)));
    assert.deepEqual(await r.readLine(70_000, 1), long);
    assert.deepEqual(await r.readLine(70_000, 2), new Uint8Array([0x62, 0x0a]));
    assert.deepEqual(await r.readLine(70_000, 3), new Uint8Array([0x0a]));
    assert.equal(await r.readLine(70_000, 4), null);
  }
  const r = new ChunkReader(from(chunks(bytes, 1)));
  await assert.rejects(() => r.readLine(1000, 1), /line 1 at offset 0 is longer than maxLineBytes 1000/);
});

Deno.test("ChunkReader.readExact allocates only once half the declared bytes have arrived", async () => {
  const sizes: number[] = [];
  const into = (n: number) => {
    sizes.push(n);
    return new Uint8Array(n);
  };
  // A declared 1 MiB of which the source sends a quarter, in 100-byte chunks: no allocation.
  const r = new ChunkReader(from(chunks(new Uint8Array(2 ** 18), 100)));
  await assert.rejects(
    () => r.readExact(2 ** 20, "a body", into),
    /stream ends at offset 262144 with 786432 bytes of a body missing \(read from offset 0\)/,
  );
  assert.deepEqual(sizes, []);
  // Three quarters sent: one allocation, then the same message, counted from the read's start.
  const r2 = new ChunkReader(from(chunks(new Uint8Array(3 * 2 ** 18 + 5), 100)));
  await r2.readExact(5, "a prefix");
  await assert.rejects(
    () => r2.readExact(2 ** 20, "a body", into),
    /stream ends at offset 786437 with 262144 bytes of a body missing \(read from offset 5\)/,
  );
  assert.deepEqual(sizes, [2 ** 20]);
});

/** An in-memory ByteReader that gives at most `max` bytes per read, as a file may. */
function byteReader(bytes: Uint8Array, max = Infinity) {
  let at = 0;
  return {
    read(into: Uint8Array): Promise<number | null> {
      if (at >= bytes.byteLength) return Promise.resolve(null);
      const n = Math.min(into.byteLength, bytes.byteLength - at, max);
      into.set(bytes.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
    stat: () => Promise.resolve({ size: bytes.byteLength }),
  };
}

Deno.test("ChunkReader.hashBody hashes exactly the body, in order, from chunks of every size and from a file", async () => {
  // A body of several pieces plus a partial one, between a prefix and a suffix.
  const n = 2 * HASH_PIECE + 12_345;
  const bytes = random(n + 200, 2);
  const expected = sha256().update(bytes.subarray(100, 100 + n)).digest("hex");
  const sources: [string, (tap: ReturnType<typeof sha256>) => ChunkReader][] = [
    ...[1000, 65_536, HASH_PIECE + 3, bytes.byteLength].map((
      size,
    ): [string, (tap: ReturnType<typeof sha256>) => ChunkReader] => [
      `chunks of ${size}`,
      (tap) => new ChunkReader(from(chunks(bytes, size)), "checkpoint", false, tap),
    ]),
    ["a file", (tap) => new ChunkReader(byteReader(bytes), "checkpoint", false, tap)],
    ["a file giving 4097 bytes per read", (tap) => new ChunkReader(byteReader(bytes, 4097), "checkpoint", false, tap)],
  ];
  for (const [label, make] of sources) {
    const tap = sha256();
    const reader = make(tap);
    assert.deepEqual(await reader.readExact(100, "a prefix"), bytes.subarray(0, 100), label);
    const h = sha256();
    const seen: number[] = [];
    await reader.hashBody(n, "a body", h, (piece, at) => {
      assert.equal(at, seen.reduce((a, b) => a + b, 0), `${label}: pieces in order`);
      assert.deepEqual(piece, bytes.subarray(100 + at, 100 + at + piece.byteLength), label);
      seen.push(piece.byteLength);
    });
    assert.equal(h.digest("hex"), expected, label);
    assert.equal(reader.position, 100 + n, label);
    assert.deepEqual(await reader.readExact(100, "a suffix"), bytes.subarray(100 + n), label);
    assert.ok(await reader.atEnd(), label);
    // The file's own digest (the tap) saw every byte, once.
    assert.equal(tap.digest("hex"), sha256().update(bytes).digest("hex"), label);
    if (label.startsWith("a file")) assert.ok(seen.every((s) => s <= HASH_PIECE), `${label}: pieces ${seen}`);
  }
});

Deno.test("ChunkReader.hashBody names the offset where a truncated stream or file ends", async () => {
  const bytes = random(3 * HASH_PIECE, 3);
  const n = 4 * HASH_PIECE;
  await assert.rejects(
    () => new ChunkReader(from(chunks(bytes, 65_536))).hashBody(n, 'tensor "w"', sha256()),
    new RegExp(
      `truncated, stream ends at offset ${bytes.byteLength} with ${
        n - bytes.byteLength
      } bytes of tensor "w" missing \\(read from offset 0\\)`,
    ),
  );
  await assert.rejects(
    () => new ChunkReader(byteReader(bytes)).hashBody(n, 'tensor "w"', sha256()),
    new RegExp(
      `truncated, stream ends at offset ${bytes.byteLength} with ${
        n - bytes.byteLength
      } bytes of tensor "w" missing \\(read from offset 0\\)`,
    ),
  );
  // A file that shrinks while it is read (its size said otherwise): the offset where it ended.
  const shrinking = { ...byteReader(bytes), stat: () => Promise.resolve({ size: n }) };
  await assert.rejects(
    () => new ChunkReader(shrinking).hashBody(n, 'tensor "w"', sha256()),
    new RegExp(`file ended at offset ${bytes.byteLength} with ${n - bytes.byteLength} bytes of tensor "w" missing`),
  );
});
