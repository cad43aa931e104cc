/**
 * Random access to a binary checkpoint file through its trailing index: the metadata and the
 * tensor list without reading tensor data, and selected tensors by name, each verified against
 * its own record digest. (The whole-stream digest needs every byte; use a full load for that.)
 *
 * @module
 */
import { ChecksumMismatchError } from "../errors.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import { metadataFromJson } from "../metadata.ts";
import type { Metadata, Tensor } from "../types.ts";
import { equalBytes, sha256, toHex } from "../_hash.ts";
import { readFull } from "../../storage/_file_io.ts";
import { typedArrayFrom } from "../dtype.ts";
import {
  BINARY_ALIGNMENT,
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
} from "./binary.ts";

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

function fail(why: string, offset: number): never {
  throw new SyntaxError(`Cannot decode checkpoint: ${why} at offset ${offset}`);
}

async function readAt(file: Deno.FsFile, offset: number, into: Uint8Array, size: number): Promise<void> {
  await file.seek(offset, Deno.SeekMode.Start);
  const filled = await readFull(file, into);
  if (filled < into.byteLength) {
    fail(`file of ${size} bytes ends while reading ${into.byteLength} bytes`, offset + filled);
  }
}

/**
 * Reads and verifies the whole record at `offset` (its length known from the index); a tensor
 * body comes back decoded (`flags` from the header say whether byte-grouped bodies may occur).
 */
async function readRecord(
  file: Deno.FsFile,
  offset: number,
  length: number,
  size: number,
  limits: Required<DecodeLimits>,
  flags = 0,
): Promise<{ kind: number; head: unknown; body: Uint8Array }> {
  if (offset + length > size) fail(`record of ${length} bytes runs past the end of the ${size}-byte file`, offset);
  // Place the record so that file offsets keep their alignment inside the buffer: the body
  // (aligned in the file) then lands aligned in memory and becomes the tensor without a copy.
  const slack = offset % BINARY_ALIGNMENT;
  const buf = new Uint8Array(slack + length).subarray(slack);
  await readAt(file, offset, buf, size);
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
  const stored = buf.subarray(digestAt);
  if (!equalBytes(actual, stored)) {
    throw new ChecksumMismatchError(`record at offset ${offset}`, toHex(stored), toHex(actual));
  }
  if (buf.subarray(headEnd, headEnd + pad).some((b) => b !== 0)) fail("non-zero padding", offset + headEnd);
  return { kind: rh.kind, head, body };
}

async function openIndexed(
  file: Deno.FsFile,
  limits: Required<DecodeLimits>,
): Promise<CheckpointIndex & { metadataEnd: number; flags: number }> {
  const size = (await file.stat()).size;
  const minimum = HEADER_BYTES + FOOTER_BYTES;
  if (size < minimum) fail(`file of ${size} bytes is too short for a binary checkpoint (at least ${minimum})`, 0);
  const header = new Uint8Array(HEADER_BYTES);
  await readAt(file, 0, header, size);
  const flags = decodeHeader(header);
  const footerAt = size - FOOTER_BYTES;
  const footerBytes = new Uint8Array(FOOTER_BYTES);
  await readAt(file, footerAt, footerBytes, size);
  const footer = decodeFooter(footerBytes, footerAt);
  if (footer.indexOffset < HEADER_BYTES || footer.indexOffset >= footerAt) {
    fail(`footer points to an index at ${footer.indexOffset}, outside the file`, footerAt);
  }
  const index = await readRecord(file, footer.indexOffset, footerAt - footer.indexOffset, size, limits);
  if (index.kind !== RecordKind.index) {
    fail(`footer points to a record of kind ${index.kind}, not an index`, footer.indexOffset);
  }
  const entries = checkIndex(index.head, `at offset ${footer.indexOffset}`, limits);
  // The metadata record: read its header to learn its length, then read it whole.
  const rhBytes = new Uint8Array(RECORD_HEADER_BYTES);
  await readAt(file, HEADER_BYTES, rhBytes, size);
  const rh = decodeRecordHeader(rhBytes, HEADER_BYTES, limits);
  if (rh.kind !== RecordKind.metadata) fail("first record is not the metadata", HEADER_BYTES);
  const metaLength = RECORD_HEADER_BYTES + rh.headBytes + DIGEST_BYTES;
  const meta = await readRecord(file, HEADER_BYTES, metaLength, size, limits);
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

/**
 * Reads a binary checkpoint file's metadata and tensor list from its index, without reading
 * tensor data. The metadata and index are verified against their record digests.
 *
 * @example
 * ```ts
 * import { readCheckpointIndex, saveCheckpoint } from "../../../mod.ts";
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
export async function readCheckpointIndex(path: string | URL, limits?: DecodeLimits): Promise<CheckpointIndex> {
  const file = await Deno.open(path, { read: true });
  try {
    const { metadataEnd: _, flags: __, ...index } = await openIndexed(file, resolveLimits(limits));
    return index;
  } finally {
    file.close();
  }
}

/**
 * Reads selected tensors from a binary checkpoint file by name, seeking to each through the
 * index and verifying each record's digest. Throws a `RangeError` for a name the file lacks.
 */
export async function readTensorsByName(
  path: string | URL,
  names: readonly string[],
  limits?: DecodeLimits,
): Promise<{ metadata: Metadata; tensors: Tensor[] }> {
  const lim = resolveLimits(limits);
  const file = await Deno.open(path, { read: true });
  try {
    const index = await openIndexed(file, lim);
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
      const rec = await readRecord(file, e.offset, e.length, index.bytes, lim, index.flags);
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
  } finally {
    file.close();
  }
}
