/**
 * Reading checkpoints from any address: a path, a `file:` URL, `http(s)://`, `s3://`,
 * `{ store, key }`, or bytes and streams. A whole read chooses its path once, in
 * {@linkcode openByteSource}: a local binary file or a binary object of a store that reads
 * objects as files (S3) is decoded from the open reader (bodies read straight into their final
 * buffers); anything else streams through `get`. Random access goes through ranges
 * ({@linkcode openRandomAccess}).
 *
 * @module
 */
import { type Codec, DETECT_BYTES, type RandomAccessReader } from "../format/codec.ts";
import {
  bytesStream,
  type CheckpointBytes,
  decodeCheckpoint as decodeBytes,
  type DecodeOptions,
  decodeWithDigest,
  detectCodec,
  sniffCheckpoint as sniffBytes,
  type SniffResult,
} from "../format/decode.ts";
import type { DecodeLimits } from "../format/limits.ts";
import type { CheckpointRecord } from "../format/types.ts";
import { binaryCodec, decodeFooter, decodeRecords, FOOTER_BYTES } from "../format/codecs/binary.ts";
import { webLoads } from "../format/codecs/_binary_decoder.ts";
import {
  type CheckpointIndex,
  hashedAhead,
  readBinaryIndex,
  readIndexEntries,
  readPieces,
} from "../format/codecs/binary_file.ts";
import type { IndexEntry } from "../format/codecs/_binary_layout.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import { readableFrom } from "../format/_streams.ts";
import { settled } from "../format/_pair.ts";
import type { ByteReader } from "../format/_byte_reader.ts";
import { type Hash, toHex } from "../format/_hash.ts";
import { fileReader, readFull } from "../storage/_file_io.ts";
import {
  blobPieces,
  blobRandomAccess,
  type CountingReader,
  openRandomAccess,
  readBlob,
} from "../storage/random_access.ts";
import { type ObjectReader, openObjectReader, openObjectStream } from "../storage/object_reader.ts";
import { freshBuffer } from "../storage/_huge_pages.ts";
import { opfsPieces } from "../storage/_opfs_read.ts";
import {
  isAddress,
  isStoreObject,
  resolveObject,
  type ResolveOptions,
  type StorageAddress,
  type StoreObject,
} from "../storage/resolve.ts";
import { requireFiles } from "../runtime/files.ts";
import { type FileHandle, SeekMode } from "../runtime/files.ts";

/**
 * Where checkpoint bytes come from: an address (a path, a `file:`, `http(s):` or `s3:` URL,
 * `{ store, key }`), all the bytes, or a stream of them.
 */
export type CheckpointSource = StorageAddress | CheckpointBytes;

/** Options for reading from an address: settings for the store it resolves to. */
export interface StorageOptions {
  /** Settings for `http(s)://` and `s3://` stores (endpoint, credentials, a custom `fetch`). */
  storage?: ResolveOptions;
}

/**
 * The store and key of an address; a path where there are no files (a browser) is a `TypeError`
 * saying so, in the words of `verb`.
 */
export function locate(
  address: StorageAddress,
  options: StorageOptions = {},
  verb = "read checkpoint from",
): StoreObject {
  if (!isStoreObject(address)) {
    const local = typeof address === "string"
      ? !/^[a-zA-Z][a-zA-Z0-9+.-]+:/.test(address)
      : address.protocol === "file:";
    if (local) requireFiles(String(address), verb);
  }
  return resolveObject(address, options.storage);
}

/** The bytes of `source` as a stream: an address is read through its store's `get`. */
export function openSource(source: CheckpointSource, options: StorageOptions = {}): ReadableStream<Uint8Array> {
  if (!isAddress(source)) return bytesStream(source);
  const { store, key } = locate(source, options);
  const local = store.files;
  if (local) {
    // A local file: the file itself (errors as the file system gives them).
    return readableFrom((async function* () {
      const file = await local.open(key);
      try {
        let left = (await file.stat()).size;
        for (;;) {
          // What is left, plus one byte that finds the end (or a file that grew) in the same read:
          // a small file no longer costs a zeroed FILE_CHUNK.
          const want = Math.min(FILE_CHUNK, left + 1);
          const buf = new Uint8Array(want);
          const n = await readFull(file, buf);
          if (n > 0) yield buf.subarray(0, n);
          if (n < want) return;
          left = Math.max(0, left - n);
        }
      } finally {
        file.close();
      }
    })());
  }
  let body: ReadableStream<Uint8Array> | undefined;
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (!reader) {
        body = (await store.get(key)).body;
        reader = body.getReader();
      }
      const r = await reader.read();
      if (r.done) c.close();
      else c.enqueue(r.value);
    },
    async cancel(reason) {
      await reader?.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * An object of a store that reads objects as files (one with `ranged`: S3) open front to back,
 * when it holds a ckpt binary checkpoint: bodies go straight into their buffers (by parallel
 * ranged GETs where the store asks for them), so large ones are hashed on the native thread as
 * from a file. `undefined` for other stores and other formats.
 */
export async function openBinaryObject(at: StoreObject, options: DecodeOptions): Promise<ObjectReader | undefined> {
  const ranged = at.store.ranged;
  if (!ranged) return undefined;
  const object = ranged.concurrency > 1
    ? await openObjectReader(at.store, at.key, { ...ranged, allocate: freshBuffer })
    : await openObjectStream(at.store, at.key, { allocate: freshBuffer });
  if (detectCodec(object.head.subarray(0, DETECT_BYTES), options.codecs) === binaryCodec) return object;
  object.close();
  return undefined;
}

/** File reads of this size; each chunk is a fresh buffer, since decoded tensors may view it. */
const FILE_CHUNK = 4 * 2 ** 20;

/** The codec a local file starts with, or `undefined` (gzip, or nothing recognised); leaves it at 0. */
export async function fileCodec(file: FileHandle, codecs?: readonly Codec[]): Promise<Codec | undefined> {
  const head = new Uint8Array(DETECT_BYTES);
  const n = await readFull(file, head);
  await file.seek(0, SeekMode.Start);
  return detectCodec(head.subarray(0, n), codecs);
}

/**
 * Recognises a checkpoint's compression and codec from its leading bytes, without consuming
 * them: the returned stream starts at the codec's first byte.
 *
 * @example
 * ```ts
 * import { encodeCheckpoint, sniffCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const bytes = encodeCheckpoint({ metadata: { step: 0 }, tensors: [] }, { compression: "gzip" });
 * const found = await sniffCheckpoint(bytes);
 * assert.equal(found.codec.name, "binary");
 * assert.equal(found.compression, "gzip");
 * await found.bytes.cancel();
 * ```
 */
export function sniffCheckpoint(
  source: CheckpointSource,
  options: DecodeOptions & StorageOptions = {},
): Promise<SniffResult> {
  return sniffBytes(openSource(source, options), options);
}

/**
 * A checkpoint's records, one at a time: the metadata first, then each tensor once its digest
 * has been checked, so a consumer can handle checkpoints larger than memory. The stream errors
 * (`ChecksumMismatchError`, `SyntaxError`, `RangeError`) when the bytes are corrupt, truncated or
 * over a limit; it completes only after the whole-stream digest has been checked. From ckpt's
 * binary format, before it errors it hands out, in order, every tensor read and verified before
 * the fault (a tensor whose own digest fails is the error: nothing after it comes out).
 *
 * @example
 * ```ts
 * import { decodeCheckpoint, encodeCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const bytes = encodeCheckpoint({
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [2], data: new Uint8Array([5, 6]) }],
 * });
 * const kinds = [];
 * for await (const record of decodeCheckpoint(bytes)) kinds.push(record.type);
 * assert.deepEqual(kinds, ["metadata", "tensor"]);
 * ```
 */
export function decodeCheckpoint(
  source: CheckpointSource,
  options: DecodeOptions & StorageOptions = {},
): ReadableStream<CheckpointRecord> {
  if (!isAddress(source)) return decodeBytes(source, options);
  return readableFrom(sourceRecords(source, options).records);
}

/**
 * Where a whole read's bytes come from, chosen once from what the source and its store can do:
 * - `file`: a local ckpt binary file, decoded from the open file (bodies read straight into their
 *   buffers, hashed on the native thread or by a range hasher);
 * - `object`: a ckpt binary object of a store that reads objects as files (S3: bodies fetched
 *   into place, by parallel ranged GETs where the store asks for them);
 * - `blob`: a ckpt binary `Blob`, given or from a store that gives its objects as Blobs (OPFS):
 *   its index read first, then each large record with one `slice().arrayBuffer()` into memory
 *   that becomes the tensor, the next read in flight while one is decoded and hashed
 *   ({@linkcode readPieces});
 * - `stream`: anything else, as a byte stream (gzip, ckpt JSON, safetensors, HTTP, bytes, a
 *   stream).
 */
export type ByteSource =
  | {
    kind: "file" | "object";
    reader: ByteReader;
    close(): void;
    /** The stream digest its footer holds (hex), by a read of the footer alone; undefined if it has none. */
    storedDigest(): Promise<string | undefined>;
  }
  | {
    kind: "blob";
    /**
     * Starts the read: its pieces, with `hashAhead` each large record hashed on a worker as it
     * comes; `whole` where the caller takes every piece at once (a load), which lets an OPFS
     * object hold its file's lock for the read.
     */
    read(hashAhead: boolean, whole: boolean): AsyncIterable<Uint8Array>;
    close(): void;
    /** As above. */
    storedDigest(): Promise<string | undefined>;
  }
  | { kind: "stream"; bytes: ReadableStream<Uint8Array> };

/** Opens `source` for a whole read by the fastest path it allows (see {@linkcode ByteSource}). */
export async function openByteSource(
  source: CheckpointSource,
  options: DecodeOptions & StorageOptions,
): Promise<ByteSource> {
  if (!isAddress(source)) {
    const binary = isBlob(source) && await openBinaryBlob(source, "blob", options);
    return binary || { kind: "stream", bytes: bytesStream(source) };
  }
  const at = locate(source, options);
  if (at.store.blob) {
    const binary = await openBinaryBlob(await at.store.blob(at.key), at.store.url + at.key, options);
    return binary || { kind: "stream", bytes: openSource(at, options) };
  }
  const local = at.store.files;
  if (local) {
    const file = await local.open(at.key);
    let binary = false;
    try {
      binary = await fileCodec(file, options.codecs) === binaryCodec;
    } finally {
      if (!binary) file.close();
    }
    if (binary) {
      const reader = fileReader(file, local.path(at.key));
      return { kind: "file", reader, close: () => file.close(), storedDigest: () => fileDigest(file) };
    }
  }
  const object = await openBinaryObject(at, options);
  if (object) {
    return {
      kind: "object",
      reader: object,
      close: () => object.close(),
      storedDigest: () => objectDigest(object, at),
    };
  }
  return { kind: "stream", bytes: openSource(at, options) };
}

function isBlob(source: unknown): source is Blob {
  return typeof Blob === "function" && source instanceof Blob;
}

/**
 * A `Blob` that holds a ckpt binary checkpoint, open for a whole read in the pieces its index
 * plans ({@linkcode readPieces}); `undefined` for other formats. An index that cannot be read
 * (a damaged or truncated file) plans 4 MiB pieces: the decoder then says what is wrong, as from
 * a stream.
 */
async function openBinaryBlob(blob: Blob, url: string, options: DecodeOptions): Promise<ByteSource | undefined> {
  const head = await readBlob(blob, 0, Math.min(DETECT_BYTES, blob.size), url);
  if (detectCodec(head, options.codecs) !== binaryCodec) return undefined;
  const source = blobRandomAccess(blob, url);
  let entries: IndexEntry[] | undefined;
  try {
    entries = await readIndexEntries(source, options);
  } catch (e) {
    if (!(e instanceof SyntaxError || e instanceof RangeError || e instanceof ChecksumMismatchError)) throw e;
  }
  const ends = readPieces(blob.size, entries, options);
  let pieces: AsyncGenerator<Uint8Array> | undefined;
  // (A worker's start is won back only beside the read of another piece.)
  const ranges = entries && ends.length > 1
    ? (start: number, end: number) => hashedAhead(entries, start, end)
    : undefined;
  return {
    kind: "blob",
    read: (hashAhead, whole) => pieces = blobRead(blob, ends, url, hashAhead ? ranges : undefined, whole),
    close: () => void pieces?.return(undefined).catch(() => {}),
    storedDigest: () => blobDigest(source),
  };
}

/**
 * A Blob's pieces: for a whole load of an OPFS object whose large records are hashed ahead,
 * read by the hash worker through a sync access handle where the engine allows
 * ({@linkcode opfsPieces}), else by slices of the Blob ({@linkcode blobPieces}).
 */
async function* blobRead(
  blob: Blob,
  ends: readonly number[],
  url: string,
  ranges: ((start: number, end: number) => [number, number][]) | undefined,
  whole: boolean,
): AsyncGenerator<Uint8Array> {
  const fast = ranges && whole ? await opfsPieces(blob, ends, url, ranges) : undefined;
  yield* fast ?? blobPieces(blob, ends, url, ranges);
}

/** The stream digest stored in a binary Blob's footer (hex); undefined if it has none. */
function blobDigest(source: RandomAccessReader): Promise<string | undefined> {
  const at = source.size - FOOTER_BYTES;
  return footerDigest(() => source.read(at, FOOTER_BYTES), at);
}

/**
 * The stream digest (hex) in the footer that `read` reads, the last {@linkcode FOOTER_BYTES} of a
 * binary checkpoint, at `at`; undefined where the file is too short for one, `read` finds none
 * (`undefined`), or what it finds is no footer, a `SyntaxError` (the full read says what is wrong).
 */
async function footerDigest(read: () => Promise<Uint8Array | undefined>, at: number): Promise<string | undefined> {
  if (at < 0) return undefined;
  try {
    const footer = await read();
    return footer && toHex(decodeFooter(footer, at).digest);
  } catch (e) {
    if (e instanceof SyntaxError) return undefined;
    throw e;
  }
}

/**
 * The records of an open {@linkcode ByteSource} and its stream digest, as `decodeWithDigest`
 * gives them; `tap`, if given, sees every byte read. `whole`: the caller takes every record at
 * once (a load, not a stream a consumer may leave half read). A file or an object is closed
 * once the records end, however they end.
 */
export function decodeByteSource(
  source: ByteSource,
  options: DecodeOptions,
  bodies: "keep" | "hash",
  tap?: Hash,
  whole = false,
): { records: AsyncGenerator<CheckpointRecord>; digest: Promise<string | undefined> } {
  if (source.kind === "stream") {
    return decodeWithDigest(tap ? tapped(source.bytes, tap) : source.bytes, options, bodies);
  }
  const open = source;
  const digest = settled<string>();
  async function* records(): AsyncGenerator<CheckpointRecord> {
    try {
      const input = open.kind === "blob" ? open.read(webLoads(bodies, options), whole) : open.reader;
      yield* decodeRecords(input, options, tap, digest, bodies);
    } finally {
      open.close();
    }
  }
  return { records: records(), digest: digest.promise };
}

/** `source`'s bytes unchanged, each also given to `hash`. */
function tapped(source: ReadableStream<Uint8Array>, hash: Hash): ReadableStream<Uint8Array> {
  return source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        hash.update(chunk);
        c.enqueue(chunk);
      },
    }),
  );
}

/** The stream digest stored in an open binary file's footer (hex), undefined if it has none; leaves the position at 0. */
async function fileDigest(file: FileHandle): Promise<string | undefined> {
  try {
    const at = (await file.stat()).size - FOOTER_BYTES;
    return await footerDigest(async () => {
      await file.seek(at, SeekMode.Start);
      const footer = new Uint8Array(FOOTER_BYTES);
      return await readFull(file, footer) < FOOTER_BYTES ? undefined : footer;
    }, at);
  } finally {
    await file.seek(0, SeekMode.Start);
  }
}

/** The stream digest stored in a binary object's footer (hex), by one ranged GET; undefined if it has none. */
function objectDigest(object: ObjectReader, at: StoreObject): Promise<string | undefined> {
  const footerAt = object.size - FOOTER_BYTES;
  return footerDigest(async () => {
    const { body, length } = await at.store.get(at.key, { range: { offset: footerAt } });
    const footer = new Uint8Array(await new Response(body).arrayBuffer());
    return length !== FOOTER_BYTES || footer.byteLength !== FOOTER_BYTES ? undefined : footer;
  }, footerAt);
}

/**
 * {@linkcode decodeCheckpoint}'s records as a generator, and the stream digest as
 * `decodeWithDigest` gives it. With `bodies: "hash"`, a ckpt binary checkpoint's tensors are
 * verified and not kept (their data an empty array); `whole` as for {@linkcode decodeByteSource}.
 * The source is opened when the first record is asked for.
 */
export function sourceRecords(
  source: CheckpointSource,
  options: DecodeOptions & StorageOptions = {},
  bodies: "keep" | "hash" = "keep",
  whole = false,
): { records: AsyncGenerator<CheckpointRecord>; digest: Promise<string | undefined> } {
  const digest = settled<string | undefined>();
  async function* records(): AsyncGenerator<CheckpointRecord> {
    try {
      const decoded = decodeByteSource(await openByteSource(source, options), options, bodies, undefined, whole);
      yield* decoded.records;
      digest.resolve(await decoded.digest);
    } finally {
      digest.reject(new Error("Cannot give the checkpoint digest: the stream did not end intact"));
    }
  }
  return { records: records(), digest: digest.promise };
}

/**
 * Opens an address for random access (reads by range, the object's tail fetched first), for
 * `Codec.readTensors`.
 */
export async function openAddress(address: StorageAddress, options: StorageOptions = {}): Promise<CountingReader> {
  const { store, key } = locate(address, options);
  return await openRandomAccess(store, key);
}

/** The codec an object starts with (the caller's first), read through a random-access reader. */
export async function readerCodec(source: CountingReader, codecs?: readonly Codec[]): Promise<Codec | undefined> {
  return detectCodec(await source.read(0, Math.min(DETECT_BYTES, source.size)), codecs);
}

/**
 * Reads a binary checkpoint's metadata and tensor list from its index, without reading tensor
 * data: from a local file, or over HTTP or S3 in two requests (the object's tail, which holds
 * the footer and usually the index, and its head, which holds the metadata). The metadata and
 * index are verified against their record digests.
 *
 * @example
 * ```ts
 * import { readCheckpointIndex, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * await saveCheckpoint(path, {
 *   metadata: { step: 3 },
 *   tensors: [{ name: "w", dtype: "int16", shape: [2, 2], data: new Int16Array(4) }],
 * });
 * const index = await readCheckpointIndex(path);
 * assert.equal(index.metadata.step, 3);
 * assert.deepEqual(index.tensors.map((t) => [t.name, t.shape]), [["w", [2, 2]]]);
 * await Deno.remove(path);
 * ```
 */
export async function readCheckpointIndex(
  address: StorageAddress,
  options: DecodeLimits & StorageOptions = {},
): Promise<CheckpointIndex> {
  if (!isAddress(address)) {
    throw new TypeError("Cannot read checkpoint index: expected a path, a URL or { store, key }");
  }
  return await readBinaryIndex(await openAddress(address, options), options);
}
