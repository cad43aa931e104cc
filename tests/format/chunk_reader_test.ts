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
function byteReader(bytes: Uint8Array, max = Infinity, reads: number[] = []) {
  let at = 0;
  return {
    read(into: Uint8Array): Promise<number | null> {
      reads.push(at);
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

Deno.test("ChunkReader.hashBody from a source that lends its memory hashes the lent views, reads nothing for the body, and names where a short source ends", async () => {
  const n = 2 * HASH_PIECE + 12_345;
  const bytes = random(n + 200, 5);
  const reads: number[] = [];
  // Lends as much as asked, each a view of `bytes` itself (its memory).
  const lending = (data: Uint8Array, size = data.byteLength) => {
    let at = 0;
    const take = (max: number) => {
      const lent = data.subarray(at, at + max);
      at += lent.byteLength;
      return lent;
    };
    return {
      read(into: Uint8Array): Promise<number | null> {
        reads.push(at);
        if (at >= data.byteLength) return Promise.resolve(null);
        const lent = take(into.byteLength);
        into.set(lent);
        return Promise.resolve(lent.byteLength);
      },
      borrow: (max: number) => Promise.resolve(at >= data.byteLength ? null : take(max)),
      stat: () => Promise.resolve({ size }),
    };
  };
  const tap = sha256();
  const reader = new ChunkReader(lending(bytes), "checkpoint", false, tap);
  assert.deepEqual(await reader.readExact(100, "a prefix"), bytes.subarray(0, 100));
  const h = sha256();
  const buffers = new Set<ArrayBufferLike>();
  let seen = 0;
  const pieces: number[] = [];
  const readsBefore = reads.length;
  await reader.hashBody(n, "a body", h, (piece, at) => {
    assert.equal(at, seen, "pieces in order");
    assert.deepEqual(piece, bytes.subarray(100 + at, 100 + at + piece.byteLength));
    buffers.add(piece.buffer);
    pieces.push(piece.byteLength);
    seen += piece.byteLength;
  });
  assert.equal(reads.length, readsBefore, "the body was lent, not read");
  assert.ok(seen > HASH_PIECE && pieces.every((p) => p <= HASH_PIECE), `a piece at a time: ${pieces}`);
  assert.ok(buffers.has(bytes.buffer), "hashed in the source's own memory");
  assert.equal(h.digest("hex"), sha256().update(bytes.subarray(100, 100 + n)).digest("hex"));
  assert.equal(reader.position, 100 + n);
  assert.deepEqual(await reader.readExact(100, "a suffix"), bytes.subarray(100 + n));
  assert.ok(await reader.atEnd());
  assert.equal(tap.digest("hex"), sha256().update(bytes).digest("hex"), "the tap saw every byte, once");
  // A source that ends before the size it gave: the offset where it ended.
  const short = bytes.subarray(0, HASH_PIECE);
  await assert.rejects(
    () => new ChunkReader(lending(short, n)).hashBody(n, 'tensor "w"', sha256()),
    new RegExp(`file ended at offset ${HASH_PIECE} with ${n - HASH_PIECE} bytes of tensor "w" missing`),
  );
});

Deno.test("ChunkReader.readBody from a file asks for a body as it is called once the size is known, and reads the bytes after it along when its buffer has room", async () => {
  const n = 3 * 2 ** 20 + 5;
  const bytes = random(100 + n + 100 + n + 40, 4);
  const reads: number[] = [];
  const tap = sha256();
  const r = new ChunkReader(byteReader(bytes, Infinity, reads), "checkpoint", false, tap);
  // Scratch memory that may hold more than the body: what the caller's `into` gives.
  const scratch = (k: number, room: number) => new Uint8Array(k + room);
  assert.deepEqual(await r.readExact(100, "a prefix"), bytes.subarray(0, 100));
  assert.deepEqual(await r.readBody(n, "a body", undefined, scratch), bytes.subarray(100, 100 + n));
  // The 100 bytes after the body came with its last piece: no read of their own.
  const before = reads.length;
  assert.deepEqual(await r.readExact(100, "a digest"), bytes.subarray(100 + n, 200 + n));
  assert.equal(reads.length, before);
  // The size is known now: the next body's first piece is asked for before readBody returns.
  const next = r.readBody(n, "a body", undefined, scratch);
  assert.equal(reads.length, before + 1);
  assert.deepEqual(await next, bytes.subarray(200 + n, 200 + 2 * n));
  // The file ends 40 bytes after it: those came along too, and nothing after them.
  const last = reads.length;
  assert.deepEqual(await r.readExact(40, "a suffix"), bytes.subarray(200 + 2 * n));
  assert.ok(await r.atEnd());
  assert.equal(reads.length, last + 1); // the one read that found the end
  assert.equal(r.position, bytes.byteLength);
  assert.equal(tap.digest("hex"), sha256().update(bytes).digest("hex"));

  // A buffer of exactly the body (a fresh one by default): the bytes after it are a read of their own.
  const exact = new ChunkReader(byteReader(bytes, Infinity, reads));
  await exact.readExact(100, "a prefix");
  assert.deepEqual(await exact.readBody(n, "a body"), bytes.subarray(100, 100 + n));
  const at = reads.length;
  assert.deepEqual(await exact.readExact(100, "a digest"), bytes.subarray(100 + n, 200 + n));
  assert.equal(reads.length, at + 1);
});

Deno.test("ChunkReader.readBody from a file reads a body hashed as it arrives in HASH_PIECE pieces, and one that is not in 4 MiB ones", async () => {
  const n = 5 * HASH_PIECE + 7;
  const bytes = random(100 + n, 7);
  // The offsets of the body's reads (the prefix's read brought its first 64 KiB along).
  const pieces = async (how: "hash" | "tap" | "none") => {
    const reads: number[] = [];
    const h = sha256();
    const r = new ChunkReader(byteReader(bytes, Infinity, reads), "checkpoint", false, how === "tap" ? h : undefined);
    await r.readExact(100, "a prefix");
    const from = reads.length;
    assert.deepEqual(await r.readBody(n, "a body", how === "hash" ? h : undefined), bytes.subarray(100));
    const whole = how === "tap" ? bytes : bytes.subarray(100);
    if (how !== "none") assert.equal(h.digest("hex"), sha256().update(whole).digest("hex"), how);
    return reads.slice(from);
  };
  const step = (at: number[]) => at.slice(1).map((o, i) => o - at[i]!);
  for (const how of ["hash", "tap"] as const) {
    const at = await pieces(how);
    assert.equal(at[0], 65_536, how);
    assert.deepEqual(step(at), [HASH_PIECE, HASH_PIECE, HASH_PIECE, HASH_PIECE], how);
  }
  assert.deepEqual(step(await pieces("none")), [4 * 2 ** 20]);
});

Deno.test("ChunkReader.readBody names the offset where a file ends that is shorter than its size said, read ahead or not", async () => {
  const n = 3 * 2 ** 20;
  const bytes = random(n - 1000, 5);
  for (const into of [undefined, (k: number, room: number) => new Uint8Array(k + room)]) {
    const shrinking = { ...byteReader(bytes), stat: () => Promise.resolve({ size: n + 64 }) };
    await assert.rejects(
      () => new ChunkReader(shrinking).readBody(n, 'tensor "w"', undefined, into),
      new RegExp(
        `file ended at offset ${bytes.byteLength} with 1000 bytes of tensor "w" missing \\(read from offset 0\\)`,
      ),
    );
  }
  // A body past the end the size gave: the file is asked again, and found too short.
  const r = new ChunkReader(byteReader(bytes));
  await r.readExact(10, "a prefix");
  await assert.rejects(
    () => r.readBody(n, 'tensor "v"'),
    /truncated, stream ends at offset 3144728 with 1010 bytes of tensor "v" missing \(read from offset 10\)/,
  );
  // A file that grew since its size was taken (a body past that size asks again): read whole.
  const grown = random(2 * n + 100, 6);
  let size = n + 100;
  const growing = { ...byteReader(grown), stat: () => Promise.resolve({ size }) };
  const g = new ChunkReader(growing);
  assert.deepEqual(await g.readBody(n, "a body"), grown.subarray(0, n));
  size = grown.byteLength;
  assert.deepEqual(await g.readBody(n, "a body"), grown.subarray(n, 2 * n));
});
