/**
 * Random access to a binary checkpoint file through its trailing index: the metadata and the
 * tensor list without reading tensor data, and selected tensors by name, each verified against
 * its own record digest. (The whole-stream digest needs every byte; use a full load for that.)
 *
 * @module
 */
import { ChecksumMismatchError } from "../errors.ts";
import { OFF_THREAD_MIN } from "./_binary_decoder.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import { metadataFromJson } from "../metadata.ts";
import type { Metadata, Tensor } from "../types.ts";
import { equalBytes, sha256, toHex } from "../_hash.ts";
import type { RandomAccessReader } from "../codec.ts";
import { DTYPES, typedArrayFrom } from "../dtype.ts";
import {
  BINARY_ALIGNMENT,
  BINARY_END_MAGIC,
  BINARY_MAGIC,
  checkBodyLength,
  checkBools,
  checkDescriptor,
  checkIndex,
  decodeFooter,
  decodeHeader,
  decodeRecordHeader,
  decodeTensorBody,
  DIGEST_BYTES,
  FOOTER_BYTES,
  HEADER_BYTES,
  type IndexEntry,
  RECORD_HEADER_BYTES,
  RecordKind,
} from "./_binary_layout.ts";

/** What a binary checkpoint file says about itself, read without its tensor data. */
export interface CheckpointIndex {
  /** The metadata, verified against its record digest. */
  metadata: Metadata;
  /** One entry per tensor, in file order, from the verified index. */
  tensors: IndexEntry[];
  /** File size in bytes. */
  bytes: number;
  /** The whole-stream SHA-256 stored in the footer (hex), not recomputed here. */
  streamSha256: string;
}

const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Bytes read from the start at once: the header, and usually the whole metadata record. */
const HEAD_GUESS = 4096;

function fail(why: string, offset: number): never {
  throw new SyntaxError(`Cannot decode checkpoint: ${why} at offset ${offset}`);
}

async function readAt(source: RandomAccessReader, offset: number, length: number): Promise<Uint8Array> {
  const got = await source.read(offset, length);
  if (got.byteLength !== length) {
    fail(`${source.url} gave ${got.byteLength} bytes for a read of ${length}`, offset);
  }
  return got;
}

/**
 * Reads and verifies the whole record at `offset` (its length known from the index); a tensor
 * body comes back decoded (`flags` from the header say whether byte-grouped bodies may occur).
 * The read starts at the aligned offset at or before the record, so a raw body (aligned in the
 * file) lands aligned in memory and becomes the tensor without a copy.
 */
async function readRecord(
  source: RandomAccessReader,
  offset: number,
  length: number,
  limits: Required<DecodeLimits>,
  flags = 0,
  known?: Uint8Array,
): Promise<{ kind: number; head: unknown; body: Uint8Array }> {
  const size = source.size;
  if (offset + length > size) fail(`record of ${length} bytes runs past the end of the ${size}-byte file`, offset);
  const slack = offset % BINARY_ALIGNMENT;
  const buf = known ?? (await readAt(source, offset - slack, slack + length)).subarray(slack);
  const rh = decodeRecordHeader(buf, offset, limits);
  const headEnd = RECORD_HEADER_BYTES + rh.headBytes;
  const fixed = headEnd + rh.bodyBytes + DIGEST_BYTES;
  const pad = rh.kind === RecordKind.tensor
    ? (BINARY_ALIGNMENT - ((offset + headEnd) % BINARY_ALIGNMENT)) % BINARY_ALIGNMENT
    : 0;
  if (fixed + pad !== length) fail(`record is ${fixed + pad} bytes but the index says ${length}`, offset);
  const digestAt = length - DIGEST_BYTES;
  let head: unknown;
  try {
    head = JSON.parse(utf8Strict.decode(buf.subarray(RECORD_HEADER_BYTES, headEnd)));
  } catch {
    fail("record head is not valid UTF-8 JSON", offset + RECORD_HEADER_BYTES);
  }
  let body: Uint8Array = buf.subarray(headEnd + pad, digestAt);
  if (rh.kind === RecordKind.tensor && (head as { encoding?: unknown })?.encoding !== undefined) {
    // The record digest of a byte-grouped tensor covers its decoded bytes.
    const d = checkDescriptor(head, `at offset ${offset + RECORD_HEADER_BYTES}`, limits, true);
    checkBodyLength(d, rh.bodyBytes, flags, offset);
    body = await decodeTensorBody(d, body, offset + headEnd + pad);
  }
  const actual = sha256().update(buf.subarray(0, headEnd + pad)).update(body).digest();
  const stored = buf.subarray(digestAt, length);
  if (!equalBytes(actual, stored)) {
    throw new ChecksumMismatchError(`record at offset ${offset}`, toHex(stored), toHex(actual));
  }
  if (buf.subarray(headEnd, headEnd + pad).some((b) => b !== 0)) fail("non-zero padding", offset + headEnd);
  return { kind: rh.kind, head, body };
}

/**
 * What other format these leading bytes are, with what to do instead, when they are not ckpt
 * binary (whose trailing index random access needs); `undefined` when they may be binary.
 */
function otherFormat(head: Uint8Array): string | undefined {
  if (BINARY_MAGIC.every((b, i) => head[i] === b)) return undefined;
  const use = "read it whole with loadCheckpoint or decodeCheckpoint";
  if (head[0] === 0x1f && head[1] === 0x8b) {
    return `it is a gzip-compressed checkpoint, which has no random access: ${use}, or save it uncompressed ` +
      "(ckpt convert FILE OUT.ckpt)";
  }
  const text = new TextDecoder().decode(head.subarray(0, 16));
  if (text.startsWith('{"ckpt":"jsonl"')) {
    return `it is a ckpt JSON Lines checkpoint, which has no trailing index: ${use}, or convert it to binary ` +
      "(ckpt convert FILE OUT.ckpt)";
  }
  if (head.byteLength >= 9 && head[8] === 0x7b) {
    return "it looks like a safetensors file: read its header with readSafetensorsHeader, or load it with loadCheckpoint";
  }
  return undefined;
}

/** Whether the last bytes of a file end with the binary footer's end magic. */
function hasEndMagic(footer: Uint8Array): boolean {
  return BINARY_END_MAGIC.every((b, i) => footer[FOOTER_BYTES - BINARY_END_MAGIC.length + i] === b);
}

/**
 * The entries of the index record the footer at `footerAt` points to (at `indexOffset`): inside
 * the file, checked against its record digest, of the index kind, within the limits.
 */
async function readFooterIndex(
  source: RandomAccessReader,
  indexOffset: number,
  footerAt: number,
  limits: Required<DecodeLimits>,
): Promise<IndexEntry[]> {
  if (indexOffset < HEADER_BYTES || indexOffset >= footerAt) {
    fail(`footer points to an index at ${indexOffset}, outside the file`, footerAt);
  }
  const index = await readRecord(source, indexOffset, footerAt - indexOffset, limits);
  if (index.kind !== RecordKind.index) {
    fail(`footer points to a record of kind ${index.kind}, not an index`, indexOffset);
  }
  return checkIndex(index.head, `at offset ${indexOffset}`, limits);
}

async function openIndexed(
  source: RandomAccessReader,
  limits: Required<DecodeLimits>,
): Promise<CheckpointIndex & { metadataEnd: number; flags: number }> {
  const size = source.size;
  const minimum = HEADER_BYTES + FOOTER_BYTES;
  if (size < minimum) fail(`file of ${size} bytes is too short for a binary checkpoint (at least ${minimum})`, 0);
  const footerAt = size - FOOTER_BYTES;
  // The footer first: a reader that fetched the object's tail holds it (and usually the index).
  const footerBytes = await readAt(source, footerAt, FOOTER_BYTES);
  const start = await readAt(source, 0, Math.min(HEAD_GUESS, footerAt));
  const other = otherFormat(start);
  if (other !== undefined) {
    throw new SyntaxError(`Cannot read checkpoint index of ${source.url}: not a ckpt binary file: ${other}`);
  }
  const flags = decodeHeader(start.subarray(0, HEADER_BYTES));
  if (!hasEndMagic(footerBytes)) {
    // A valid header but no footer where the file ends: the usual cause is a cut-off copy.
    fail(
      `the file of ${size} bytes is truncated (or damaged at its end): its last ${FOOTER_BYTES} bytes are not ` +
        `a footer (no end magic)`,
      footerAt + FOOTER_BYTES - BINARY_END_MAGIC.length,
    );
  }
  const footer = decodeFooter(footerBytes, footerAt);
  const entries = await readFooterIndex(source, footer.indexOffset, footerAt, limits);
  // The metadata record: its header gives its length; it is usually inside the bytes read already.
  if (start.byteLength < HEADER_BYTES + RECORD_HEADER_BYTES) fail("no room for the metadata record", HEADER_BYTES);
  const rh = decodeRecordHeader(start.subarray(HEADER_BYTES), HEADER_BYTES, limits);
  if (rh.kind !== RecordKind.metadata) fail("first record is not the metadata", HEADER_BYTES);
  const metaLength = RECORD_HEADER_BYTES + rh.headBytes + DIGEST_BYTES;
  if (HEADER_BYTES + metaLength > footer.indexOffset) {
    fail(`metadata record of ${metaLength} bytes runs into the index at ${footer.indexOffset}`, HEADER_BYTES);
  }
  const inStart = HEADER_BYTES + metaLength <= start.byteLength
    ? start.subarray(HEADER_BYTES, HEADER_BYTES + metaLength)
    : undefined;
  const meta = await readRecord(source, HEADER_BYTES, metaLength, limits, flags, inStart);
  const metadata = metadataFromJson(meta.head, `at offset ${HEADER_BYTES + RECORD_HEADER_BYTES}`);
  let next = HEADER_BYTES + metaLength;
  const names = new Set<string>();
  for (const e of entries) {
    if (e.offset !== next) {
      fail(`index entry ${JSON.stringify(e.name)} points to ${e.offset}, expected ${next}`, footer.indexOffset);
    }
    if (names.has(e.name)) fail(`index lists ${JSON.stringify(e.name)} twice`, footer.indexOffset);
    names.add(e.name);
    next += e.length;
  }
  if (next !== footer.indexOffset) {
    fail(`index entries end at ${next}, but the index starts at ${footer.indexOffset}`, footer.indexOffset);
  }
  return {
    metadata,
    tensors: entries,
    bytes: size,
    streamSha256: toHex(footer.digest),
    metadataEnd: HEADER_BYTES + metaLength,
    flags,
  };
}

/** A whole read's pieces hold whole records up to this many bytes together (one larger record alone). */
const PIECE_BYTES = 16 * 2 ** 20;
/** Where no index says where records start, pieces of this size. */
const BLIND_PIECE_BYTES = 4 * 2 ** 20;
/** Record starts are cut at this alignment: the largest element's, so a body lies aligned for its typed array. */
const CUT_ALIGNMENT = 8;

/**
 * Where a whole read of a binary checkpoint of `size` bytes may cut it into pieces, read one
 * after the other (each piece's end offset, ascending, the last one `size`). From the index read
 * first ({@linkcode readIndexEntries}): pieces are cut only just before a record (at the 8-byte
 * aligned offset at or before it, inside the digest of the one before), and hold whole records
 * up to 16 MiB together, or one larger record alone, so that each record's bytes lie together
 * (one digest call over the record) and each body lies aligned for its typed array (the tensor
 * without a copy). The pieces only guide the reads: the decoder checks every byte as from any
 * stream, so an index that lies costs copies, never a wrong result; and a piece is never longer
 * than 16 MiB, or than the largest record the index lists with a length its shape and the
 * limits allow (then it is cut in 4 MiB steps). Without `entries` (no index could be read),
 * pieces of 4 MiB.
 *
 * @example
 * ```ts
 * import { readPieces } from "./binary_file.ts";
 * import assert from "node:assert/strict";
 * const MiB = 2 ** 20;
 * assert.deepEqual(readPieces(10 * MiB), [4 * MiB, 8 * MiB, 10 * MiB]);
 * const record = (offset: number) => ({ name: `t${offset}`, dtype: "uint8" as const, shape: [10 * MiB], group: "params", offset, length: 10 * MiB + 160 });
 * const a = record(100), b = record(100 + 10 * MiB + 160);
 * assert.deepEqual(readPieces(20 * MiB + 2000, [a, b]), [b.offset - (b.offset % 8), 20 * MiB + 2000]);
 * ```
 */
export function readPieces(size: number, entries: readonly IndexEntry[] = [], limits?: DecodeLimits): number[] {
  const lim = resolveLimits(limits);
  // Where records start (aligned down), for records whose length their shape allows: a record's
  // body, a head of at most maxHeaderBytes, the padding and the digest.
  const starts: number[] = [0];
  let largest = 0;
  for (const e of entries) {
    const most = RECORD_HEADER_BYTES + lim.maxHeaderBytes + BINARY_ALIGNMENT + tensorBytes(e) + DIGEST_BYTES;
    const cut = e.offset - (e.offset % CUT_ALIGNMENT);
    if (e.length > most || cut <= starts.at(-1)! || cut >= size) continue;
    starts.push(cut);
    largest = Math.max(largest, e.length);
  }
  // A unit (from one start to the next) longer than this is not one record: cut in steps.
  const longest = starts.length === 1 ? BLIND_PIECE_BYTES : Math.max(PIECE_BYTES, largest + 2 * BLIND_PIECE_BYTES);
  const ends: number[] = [];
  let at = 0; // where the piece being packed starts
  let last = 0; // the end of the last unit packed into it
  for (const end of [...starts.slice(1), size]) {
    if (end - at > PIECE_BYTES && last > at) ends.push(at = last); // this unit starts a new piece
    if (end - last > longest) {
      // Not one record: 4 MiB steps.
      while (end - at > BLIND_PIECE_BYTES) ends.push(at += BLIND_PIECE_BYTES);
    }
    last = end;
  }
  if (size > at) ends.push(size);
  return ends;
}

/**
 * The records of the piece from `start` to `end` whose digests a load in a page computes as the
 * piece comes in (on a worker: `blobPieces`): each raw tensor of 1 MiB or more lying whole in it,
 * as `[offset in the piece, length]` of its bytes before the digest, the bytes the decoder hashes
 * with one WebCrypto call (a range it does not ask for is never used).
 *
 * @example
 * ```ts
 * import { hashedAhead } from "./binary_file.ts";
 * import assert from "node:assert/strict";
 * const MiB = 2 ** 20;
 * const big = { name: "w", dtype: "uint8" as const, shape: [2 * MiB], group: "params", offset: 128, length: 2 * MiB + 160 };
 * const small = { ...big, name: "b", shape: [16], offset: big.offset + big.length, length: 224 };
 * // Only the large raw tensor lying whole in the piece, its bytes before the digest, from the piece's start.
 * assert.deepEqual(hashedAhead([big, small], 64, 4 * MiB), [[64, 2 * MiB + 128]]);
 * assert.deepEqual(hashedAhead([big, small], 64, MiB), []);
 * ```
 */
export function hashedAhead(entries: readonly IndexEntry[], start: number, end: number): [number, number][] {
  return entries
    .filter((e) =>
      !e.encoding && tensorBytes(e) >= OFF_THREAD_MIN && e.offset >= start && e.offset + e.length - DIGEST_BYTES <= end
    )
    .map((e) => [e.offset - start, e.length - DIGEST_BYTES]);
}

/** A tensor's byte length from its index entry. */
function tensorBytes(e: IndexEntry): number {
  return e.shape.reduce((n, d) => n * d, DTYPES[e.dtype].bytes);
}

/**
 * A binary checkpoint's index entries, from its footer and index record alone (the index
 * checked against its record digest and the limits; an index larger than `maxHeaderBytes` is
 * not read). A whole read plans its pieces by it ({@linkcode readPieces}).
 *
 * @example
 * ```ts
 * import { readIndexEntries } from "./binary_file.ts";
 * import { encodeCheckpoint } from "../encode.ts";
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array(await new Response(encodeCheckpoint({
 *   metadata: { step: 3 },
 *   tensors: [{ name: "w", dtype: "int16", shape: [2, 2], data: new Int16Array(4) }],
 * })).arrayBuffer());
 * const source = {
 *   url: "memory:x",
 *   size: bytes.byteLength,
 *   read: (offset: number, length: number) => Promise.resolve(bytes.slice(offset, offset + length)),
 * };
 * const [w] = await readIndexEntries(source);
 * assert.deepEqual([w!.name, w!.dtype, w!.shape], ["w", "int16", [2, 2]]);
 * await assert.rejects(readIndexEntries({ ...source, size: 10 }), SyntaxError);
 * ```
 */
export async function readIndexEntries(source: RandomAccessReader, limits?: DecodeLimits): Promise<IndexEntry[]> {
  const lim = resolveLimits(limits);
  const size = source.size;
  if (size < HEADER_BYTES + FOOTER_BYTES) fail(`file of ${size} bytes is too short for a binary checkpoint`, 0);
  const footerAt = size - FOOTER_BYTES;
  const footer = decodeFooter(await readAt(source, footerAt, FOOTER_BYTES), footerAt);
  // Checked before the index is read: nothing is allocated from an unchecked footer.
  const length = footerAt - footer.indexOffset;
  if (length > RECORD_HEADER_BYTES + lim.maxHeaderBytes + DIGEST_BYTES) {
    throw new RangeError(`Cannot decode checkpoint: index of ${length} bytes is over maxHeaderBytes`);
  }
  return await readFooterIndex(source, footer.indexOffset, footerAt, lim);
}

/**
 * Reads a binary checkpoint's metadata and tensor list from its index, without reading tensor
 * data: the footer, the index and the metadata record, each verified against its record digest.
 * (`readCheckpointIndex` does this for a path or any storage address.)
 *
 * @example
 * ```ts
 * import { readBinaryIndex } from "./binary_file.ts";
 * import { encodeCheckpoint } from "../encode.ts";
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array(await new Response(encodeCheckpoint({
 *   metadata: { step: 3 },
 *   tensors: [{ name: "w", dtype: "int16", shape: [2, 2], data: new Int16Array(4) }],
 * })).arrayBuffer());
 * const source = {
 *   url: "memory:x",
 *   size: bytes.byteLength,
 *   read: (offset: number, length: number) => Promise.resolve(bytes.slice(offset, offset + length)),
 * };
 * const index = await readBinaryIndex(source);
 * assert.equal(index.metadata.step, 3);
 * assert.deepEqual(index.tensors.map((t) => [t.name, t.shape]), [["w", [2, 2]]]);
 * ```
 */
export async function readBinaryIndex(source: RandomAccessReader, limits?: DecodeLimits): Promise<CheckpointIndex> {
  const { metadataEnd: _, flags: __, ...index } = await openIndexed(source, resolveLimits(limits));
  return index;
}

/**
 * Reads selected tensors from a binary checkpoint by name: the index first, then each named
 * tensor's record (one read each), each verified against its record digest. Tensors come in
 * file order. Throws a `RangeError` for a name the checkpoint lacks.
 *
 * @example
 * ```ts
 * import { readTensorsByName } from "./binary_file.ts";
 * import { encodeCheckpoint } from "../encode.ts";
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array(await new Response(encodeCheckpoint({
 *   metadata: { step: 1 },
 *   tensors: [
 *     { name: "a", dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) },
 *     { name: "b", dtype: "uint8", shape: [1], data: new Uint8Array([3]) },
 *   ],
 * })).arrayBuffer());
 * const source = {
 *   url: "memory:x",
 *   size: bytes.byteLength,
 *   read: (offset: number, length: number) => Promise.resolve(bytes.slice(offset, offset + length)),
 * };
 * const some = await readTensorsByName(source, ["b"]);
 * assert.deepEqual(some.tensors.map((t) => [t.name, [...t.data]]), [["b", [3]]]);
 * ```
 */
export async function readTensorsByName(
  source: RandomAccessReader,
  names: readonly string[],
  limits?: DecodeLimits,
): Promise<{ metadata: Metadata; tensors: Tensor[] }> {
  if (!Array.isArray(names) || names.some((n) => typeof n !== "string")) {
    throw new TypeError("Cannot load checkpoint: names must be an array of strings");
  }
  const lim = resolveLimits(limits);
  const index = await openIndexed(source, lim);
  const wanted = new Set(names);
  const missing = [...wanted].filter((n) => !index.tensors.some((e) => e.name === n));
  if (missing.length > 0) {
    throw new RangeError(
      `Cannot load checkpoint: no tensor named ${missing.map((n) => JSON.stringify(n)).join(", ")}`,
    );
  }
  const tensors: Tensor[] = [];
  for (const e of index.tensors) {
    if (!wanted.has(e.name)) continue;
    let rec: Awaited<ReturnType<typeof readRecord>>;
    try {
      rec = await readRecord(source, e.offset, e.length, lim, index.flags);
    } catch (err) {
      // Name the tensor, as a full read does.
      if (!(err instanceof ChecksumMismatchError)) throw err;
      throw new ChecksumMismatchError(
        `tensor ${JSON.stringify(e.name)}`,
        err.expected,
        err.actual,
        `at offset ${e.offset}`,
      );
    }
    if (rec.kind !== RecordKind.tensor) {
      fail(`index entry ${JSON.stringify(e.name)} points to a record of kind ${rec.kind}`, e.offset);
    }
    const d = checkDescriptor(rec.head, `at offset ${e.offset + RECORD_HEADER_BYTES}`, lim, true);
    if (
      d.name !== e.name || d.dtype !== e.dtype || d.group !== e.group || d.shape.join() !== e.shape.join() ||
      d.encoding !== e.encoding
    ) {
      fail(`tensor record disagrees with its index entry ${JSON.stringify(e.name)}`, e.offset);
    }
    if (rec.body.byteLength !== d.byteLength) {
      fail(`tensor ${JSON.stringify(d.name)} has ${rec.body.byteLength} bytes, needs ${d.byteLength}`, e.offset);
    }
    const data = typedArrayFrom(d.dtype, rec.body);
    if (d.dtype === "bool") checkBools(data as Uint8Array, d.name, `at offset ${e.offset}`);
    tensors.push({ name: d.name, dtype: d.dtype, shape: d.shape, group: d.group, data });
  }
  return { metadata: index.metadata, tensors };
}
