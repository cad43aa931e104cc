// The chunk reader every decoder pulls bytes through, fed in chunks of every size.
import assert from "node:assert/strict";
import { ChunkReader } from "../../src/format/_chunk_reader.ts";
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
