/**
 * Random access to one object of any {@linkcode ObjectStore} by byte ranges, in few requests:
 * the first request is a suffix range that gives the object's size and its tail (where a binary
 * checkpoint keeps its footer and, usually, its index); reads inside that tail cost nothing more.
 *
 * @module
 */
import type { RandomAccessReader } from "../format/codec.ts";
import type { ObjectStore } from "./types.ts";
import { iterate } from "../format/_streams.ts";
import { PieceHasher } from "./_piece_hasher.ts";
import { notedPiece, readAhead } from "./_read_ahead.ts";

/** How many trailing bytes the first request fetches, by default. */
export const DEFAULT_TAIL_BYTES = 64 * 1024;

/** Small reads within this many leading bytes fetch them all once (headers and metadata live there). */
const HEAD_BYTES = 4096;

/** Options for {@linkcode openRandomAccess}. */
export interface RandomAccessOptions {
  /**
   * Bytes of the object's tail fetched by the first request, kept for later reads.
   *
   * @default {65536}
   */
  tailBytes?: number;
  /** Cancels the requests. */
  signal?: AbortSignal;
}

/** A {@linkcode RandomAccessReader} that counts what it fetched. */
export interface CountingReader extends RandomAccessReader {
  /** Requests made to the store so far (the first, suffix request included). */
  readonly requests: number;
  /** Bytes fetched from the store so far. */
  readonly bytesFetched: number;
}

async function readBody(body: ReadableStream<Uint8Array>, length: number, url: string): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  let at = 0;
  for await (const chunk of iterate(body)) {
    if (at + chunk.byteLength > length) {
      await body.cancel().catch(() => {});
      throw new RangeError(`Cannot read ${url}: the store sent more than the ${length} bytes asked for`);
    }
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  if (at !== length) throw new SyntaxError(`Cannot read ${url}: the store sent ${at} of ${length} bytes`);
  return out;
}

/** A read of `length` bytes at `offset` of a `size`-byte object: a bad range is a `RangeError`, one past the end a `SyntaxError`. */
function checkRead(url: string, size: number, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw new RangeError(`Cannot read ${url}: bad range of ${length} bytes at offset ${offset}`);
  }
  if (offset + length > size) {
    throw new SyntaxError(
      `Cannot read ${url}: ${length} bytes at offset ${offset} run past the end of the ${size}-byte object`,
    );
  }
}

/**
 * Opens one object for reads by range. The first request fetches the last `tailBytes` bytes
 * (a suffix range), which tells the size; reads inside that tail are served from memory, and a
 * read that straddles it fetches only the part before. Every later request checks the object's
 * version is still the one first seen, so a reader never mixes bytes of two versions.
 *
 * @example
 * ```ts
 * import { openRandomAccess } from "./random_access.ts";
 * import { MemoryStore } from "./memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore();
 * await store.put("x.bin", new Uint8Array(200_000).map((_, i) => i & 255));
 * const r = await openRandomAccess(store, "x.bin");
 * assert.equal(r.size, 200_000);
 * assert.deepEqual([...await r.read(199_998, 2)], [(199_998 & 255), (199_999 & 255)]);
 * assert.equal(r.requests, 1); // served from the tail fetched first
 * assert.deepEqual([...await r.read(0, 3)], [0, 1, 2]);
 * assert.equal(r.requests, 2);
 * ```
 */
export async function openRandomAccess(
  store: ObjectStore,
  key: string,
  options: RandomAccessOptions = {},
): Promise<CountingReader> {
  // A store that gives its objects as Blobs (OPFS) reads each range straight from the Blob.
  if (store.blob) return blobRandomAccess(await store.blob(key), store.url + key);
  const tailBytes = options.tailBytes ?? DEFAULT_TAIL_BYTES;
  if (!Number.isSafeInteger(tailBytes) || tailBytes < 0) {
    throw new RangeError(`Invalid tailBytes: expected a non-negative safe integer, got ${tailBytes}`);
  }
  const signal = options.signal;
  const first = await store.get(key, { range: { suffix: tailBytes }, ...(signal ? { signal } : {}) });
  const url = store.url + key;
  const size = first.info.size;
  const version = first.info.version;
  const tail = await readBody(first.body, first.length, url);
  const tailAt = first.offset;
  let head: Uint8Array | undefined; // the object's first bytes, once a read near the start fetched them
  let requests = 1;
  let bytesFetched = tail.byteLength;

  const fetchRange = async (offset: number, length: number): Promise<Uint8Array> => {
    requests++;
    const r = await store.get(key, { range: { offset, length }, ...(signal ? { signal } : {}) });
    if (r.info.version !== version) {
      await r.body.cancel().catch(() => {});
      throw new Error(
        `Cannot read ${url}: the object changed while being read (version ${version}, now ${r.info.version})`,
      );
    }
    if (r.offset !== offset || r.length !== length) {
      await r.body.cancel().catch(() => {});
      throw new SyntaxError(
        `Cannot read ${url}: asked for ${length} bytes at ${offset}, got ${r.length} at ${r.offset}`,
      );
    }
    const bytes = await readBody(r.body, length, url);
    bytesFetched += length;
    return bytes;
  };

  return {
    url,
    size,
    get requests() {
      return requests;
    },
    get bytesFetched() {
      return bytesFetched;
    },
    async read(offset: number, length: number): Promise<Uint8Array> {
      checkRead(url, size, offset, length);
      if (length === 0) return new Uint8Array(0);
      if (offset >= tailAt) return tail.slice(offset - tailAt, offset - tailAt + length);
      if (head && offset + length <= head.byteLength) return head.slice(offset, offset + length);
      if (offset + length <= Math.min(HEAD_BYTES, tailAt)) {
        // Near the start (a format's header, its metadata): fetch the whole head once.
        head = await fetchRange(0, Math.min(HEAD_BYTES, tailAt));
        return head.slice(offset, offset + length);
      }
      if (offset + length <= tailAt) return await fetchRange(offset, length);
      // Straddles the start of the tail: fetch only what comes before it.
      const out = new Uint8Array(length);
      out.set(await fetchRange(offset, tailAt - offset));
      out.set(tail.subarray(0, offset + length - tailAt), tailAt - offset);
      return out;
    },
  };
}

/** The name of a DOM exception (`NotReadableError`), or "". */
function domName(e: unknown): string {
  return e !== null && typeof e === "object" && "name" in e ? String((e as { name: unknown }).name) : "";
}

/**
 * `length` bytes of `blob` from `offset`, in fresh memory of their own (`slice().arrayBuffer()`:
 * one read, no copy here). A `File` whose file was replaced or deleted since (in OPFS) can no
 * longer be read: that is an `Error` saying so, as a read of the object through its store says.
 */
export async function readBlob(blob: Blob, offset: number, length: number, url: string): Promise<Uint8Array> {
  let bytes: ArrayBuffer;
  try {
    bytes = await blob.slice(offset, offset + length).arrayBuffer();
  } catch (e) {
    if (domName(e) !== "NotReadableError") throw e;
    throw new Error(`Cannot read ${url}: the object was replaced or deleted while it was being read`, { cause: e });
  }
  if (bytes.byteLength !== length) {
    throw new SyntaxError(`Cannot read ${url}: asked for ${length} bytes at ${offset}, got ${bytes.byteLength}`);
  }
  return new Uint8Array(bytes);
}

/**
 * Random access to a `Blob` (an OPFS object's `File`): each read one `slice().arrayBuffer()`.
 *
 * @example
 * ```ts
 * import { blobRandomAccess } from "./random_access.ts";
 * import assert from "node:assert/strict";
 * const r = blobRandomAccess(new Blob([new Uint8Array([1, 2, 3, 4])]), "memory:x");
 * assert.deepEqual([...await r.read(1, 2)], [2, 3]);
 * assert.equal(r.requests, 1);
 * ```
 */
export function blobRandomAccess(blob: Blob, url: string): CountingReader {
  let requests = 0;
  let bytesFetched = 0;
  return {
    url,
    size: blob.size,
    get requests() {
      return requests;
    },
    get bytesFetched() {
      return bytesFetched;
    },
    async read(offset: number, length: number): Promise<Uint8Array> {
      checkRead(url, blob.size, offset, length);
      requests++;
      bytesFetched += length;
      return await readBlob(blob, offset, length, url);
    },
  };
}

/**
 * `blob`'s bytes in the pieces that `ends` (each piece's end offset, ascending, the last one the
 * blob's size) cut it into, each in fresh memory of its own, read one after the other while the
 * consumer works on an earlier one (reads run off this thread; two pieces ahead at most). With
 * `ranges` (the ranges of a piece to hash, relative to it), each piece that has some is hashed
 * on a worker thread ({@linkcode PieceHasher}) while the next is read, and each digest noted for
 * its bytes (`noteDigest`); where no worker can run, or it failed, pieces come without.
 *
 * @example
 * ```ts
 * import { blobPieces } from "./random_access.ts";
 * import assert from "node:assert/strict";
 * const pieces = [];
 * for await (const p of blobPieces(new Blob([new Uint8Array([1, 2, 3])]), [1, 3], "memory:x")) pieces.push([...p]);
 * assert.deepEqual(pieces, [[1], [2, 3]]);
 * ```
 */
export async function* blobPieces(
  blob: Blob,
  ends: readonly number[],
  url: string,
  ranges?: (start: number, end: number) => [number, number][],
): AsyncGenerator<Uint8Array> {
  const startOf = (i: number) => i === 0 ? 0 : ends[i - 1]!;
  const read = (i: number) => readBlob(blob, startOf(i), ends[i]! - startOf(i), url);
  let hasher: PieceHasher | undefined | null; // null: none can run
  const hashed = async (i: number, bytes: Uint8Array): Promise<Uint8Array> => {
    const wanted = ranges?.(startOf(i), ends[i]!) ?? [];
    if (wanted.length === 0 || (hasher ??= PieceHasher.acquire() ?? null) === null) return bytes;
    try {
      return notedPiece(await hasher.digest(bytes.buffer as ArrayBuffer, wanted), wanted);
    } catch {
      // The worker failed: the piece is hashed by the decoder, read again if it went there (detached).
      return bytes.byteLength > 0 ? bytes : await read(i);
    }
  };
  // Reads one after the other (each starts once the one before it is in), each then hashed.
  let reads: Promise<unknown> = Promise.resolve();
  try {
    yield* readAhead(ends.length, (i) => {
      const bytes = reads.then(() => read(i));
      reads = bytes.catch(() => {});
      return bytes.then((b) => hashed(i, b));
    });
  } finally {
    hasher?.release();
  }
}
