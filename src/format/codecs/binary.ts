/**
 * The binary codec: ckpt's own format, specified byte by byte in `docs/FORMAT.md`. Written and
 * read in one pass, tensor data aligned to 64 bytes, a SHA-256 after every record, a trailing
 * index for random access, and a whole-stream SHA-256 in the footer (over every byte but the
 * tensor bodies, each of which is covered by the record digest the stream digest includes, so a
 * full verification hashes every byte once).
 *
 * @module
 */
import type {
  CheckpointDecoder,
  CheckpointEncoder,
  Codec,
  DecoderOptions,
  EncoderOptions,
  RandomAccessReader,
} from "../codec.ts";
import { bytesOf, typedArrayFrom } from "../dtype.ts";
import { ChecksumMismatchError } from "../errors.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import { metadataFromJson, metadataToJson } from "../metadata.ts";
import type { Checkpoint, CheckpointRecord } from "../types.ts";
import { readTensorsByName } from "./binary_file.ts";
import type { ByteReader } from "../_byte_reader.ts";
import { ChunkReader } from "../_chunk_reader.ts";
import { equalBytes, type Hash, sha256, toHex } from "../_hash.ts";
import { digestingDecoder, digestingEncoder, type EncoderDigests, type Settle } from "../_pair.ts";
import { EncodeGuard } from "../_encode_guard.ts";
import { BYTEGROUP_ENCODING, encodeByteGroups, PlaneScratch } from "./_bytegroup.ts";
import {
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
  encodeFooter,
  encodeHeader,
  encodeRecordPrefix,
  fail,
  FLAG_BYTEGROUP,
  FOOTER_BYTES,
  HEADER_BYTES,
  type IndexEntry,
  indexEntry,
  padTo,
  parseJson,
  RECORD_HEADER_BYTES,
  RecordKind,
  tensorHead,
  utf8,
} from "./_binary_layout.ts";

export {
  BINARY_ALIGNMENT,
  BINARY_END_MAGIC,
  BINARY_MAGIC,
  BINARY_VERSION,
  checkBodyLength,
  checkBools,
  checkDescriptor,
  checkIndex,
  decodeFooter,
  decodeHeader,
  decodeRecordHeader,
  decodeTensorBody,
  DIGEST_BYTES,
  encodeFooter,
  encodeHeader,
  encodeRecordPrefix,
  FLAG_BYTEGROUP,
  FOOTER_BYTES,
  HEADER_BYTES,
  type IndexEntry,
  RECORD_HEADER_BYTES,
  type RecordHeader,
  RecordKind,
  type TensorDescriptor,
  tensorHead,
} from "./_binary_layout.ts";

/** Body bytes handed on per chunk by the encoder, so hashing and writing interleave. */
const BODY_SLICE = 4 * 2 ** 20;

async function* encodeRecords(
  records: AsyncIterable<CheckpointRecord>,
  settle: EncoderDigests,
  byteGroup = false,
  transient = false,
): AsyncGenerator<Uint8Array> {
  // stream: every byte before the footer except tensor bodies (their record digests stand in);
  // file: every byte, for the caller's whole-file digest (what sha256sum prints), when asked.
  const stream = sha256();
  const file = settle.sha256 ? sha256() : undefined;
  let position = 0;
  const emit = (bytes: Uint8Array, record?: Hash, body = false): Uint8Array => {
    if (!body) stream.update(bytes);
    file?.update(bytes);
    record?.update(bytes);
    position += bytes.byteLength;
    return bytes;
  };
  const index: IndexEntry[] = [];
  const guard = new EncodeGuard();
  const scratch = new PlaneScratch();
  try {
    for await (const rec of records) {
      if (guard.check(rec) === "metadata") {
        yield emit(encodeHeader(byteGroup ? FLAG_BYTEGROUP : 0));
        const head = utf8.encode(metadataToJson((rec as Extract<CheckpointRecord, { type: "metadata" }>).metadata));
        const h = sha256();
        yield emit(encodeRecordPrefix(RecordKind.metadata, head, 0, position), h);
        yield emit(new Uint8Array(h.digest()));
        continue;
      }
      const t = (rec as Extract<CheckpointRecord, { type: "tensor" }>).tensor;
      const start = position;
      const body = bytesOf(t.data);
      const h = sha256();
      const grouped = byteGroup ? await encodeByteGroups(t.dtype, body, { scratch, transient }) : undefined;
      const encoding = grouped ? BYTEGROUP_ENCODING : undefined;
      const head = tensorHead(t, encoding);
      yield emit(encodeRecordPrefix(RecordKind.tensor, head, grouped?.byteLength ?? body.byteLength, position), h);
      if (grouped) {
        // The record digest covers the tensor's own bytes, so a reader checks what it decoded.
        h.update(body);
        for (const part of grouped.parts) yield emit(part, undefined, true);
      } else {
        for (let i = 0; i < body.byteLength; i += BODY_SLICE) {
          yield emit(body.subarray(i, Math.min(body.byteLength, i + BODY_SLICE)), h, true);
        }
      }
      yield emit(new Uint8Array(h.digest()));
      const group = t.group ?? "params";
      index.push(indexEntry({ ...t, shape: [...t.shape], group, encoding }, start, position - start));
    }
    guard.end();
    const indexOffset = position;
    const head = utf8.encode(JSON.stringify({ tensors: index }));
    const h = sha256();
    yield emit(encodeRecordPrefix(RecordKind.index, head, 0, position), h);
    yield emit(new Uint8Array(h.digest()));
    const streamDigest = stream.digest();
    const footer = encodeFooter(indexOffset, streamDigest);
    settle.digest.resolve(toHex(streamDigest));
    if (file) settle.sha256?.resolve(file.update(footer).digest("hex"));
    yield footer;
  } catch (e) {
    settle.sha256?.reject(e);
    settle.digest.reject(e);
    throw e;
  }
}

/**
 * Decodes a binary stream record by record. `input` is a chunk sequence or an open file (then
 * bodies are read straight into their final buffers, the next piece read while one is hashed,
 * and `tap`, if given, sees every byte of the file).
 */
export async function* decodeRecords(
  input: AsyncIterable<Uint8Array> | ByteReader,
  limits?: DecoderOptions,
  tap?: Hash,
  digest?: Settle<string>,
): AsyncGenerator<CheckpointRecord> {
  const lim = resolveLimits(limits);
  const r = new ChunkReader(input, "checkpoint", limits?.reuseBuffers ?? false, tap);
  const stream = sha256();
  const read = async (n: number, what: string, record?: Hash): Promise<Uint8Array> => {
    const b = await r.readExact(n, what);
    stream.update(b);
    record?.update(b);
    return b;
  };
  const checkDigest = async (h: Hash, subject: string, at: number): Promise<void> => {
    const stored = await read(DIGEST_BYTES, `the digest of ${subject}`);
    const actual = h.digest();
    if (!equalBytes(actual, stored)) {
      throw new ChecksumMismatchError(subject, toHex(stored), toHex(actual), `at offset ${at}`);
    }
  };
  const flags = decodeHeader(await read(HEADER_BYTES, "the header"));
  const seen: IndexEntry[] = [];
  const names = new Set<string>();
  let sawMetadata = false;
  for (;;) {
    const at = r.position;
    const h = sha256();
    const rh = decodeRecordHeader(await read(RECORD_HEADER_BYTES, "a record header", h), at, lim);
    const headAt = r.position;
    const head = await read(rh.headBytes, "a record head", h);
    if (rh.kind === RecordKind.metadata) {
      if (sawMetadata) fail("second metadata record", at);
      const metadata = metadataFromJson(parseJson(head, "metadata", headAt), `at offset ${headAt}`);
      await checkDigest(h, "metadata", at);
      sawMetadata = true;
      yield { type: "metadata", metadata };
      continue;
    }
    if (!sawMetadata) fail(`record kind ${rh.kind} before the metadata record`, at);
    if (rh.kind === RecordKind.index) {
      const entries = checkIndex(parseJson(head, "index", headAt), `at offset ${headAt}`, lim);
      await checkDigest(h, "index", at);
      if (JSON.stringify(entries) !== JSON.stringify(seen)) fail("index does not match the tensors in the stream", at);
      const footerAt = r.position;
      const expected = stream.digest();
      const footer = decodeFooter(await r.readExact(FOOTER_BYTES, "the footer"), footerAt);
      if (footer.indexOffset !== at) {
        fail(`footer points to index at ${footer.indexOffset}, found it at ${at}`, footerAt);
      }
      if (!equalBytes(expected, footer.digest)) {
        throw new ChecksumMismatchError(
          "stream",
          toHex(footer.digest),
          toHex(expected),
          `at offset ${footerAt + 8}`,
        );
      }
      if (!(await r.atEnd())) fail("trailing bytes after the footer", r.position);
      digest?.resolve(toHex(footer.digest));
      return;
    }
    // A tensor record.
    if (seen.length >= lim.maxTensors) {
      throw new RangeError(`Cannot decode checkpoint: more than maxTensors ${lim.maxTensors} tensors at offset ${at}`);
    }
    const d = checkDescriptor(parseJson(head, "tensor descriptor", headAt), `at offset ${headAt}`, lim, true);
    if (names.has(d.name)) fail(`duplicate tensor name ${JSON.stringify(d.name)}`, headAt);
    names.add(d.name);
    checkBodyLength(d, rh.bodyBytes, flags, at);
    const padAt = r.position;
    const pad = await read(padTo(padAt), "padding", h);
    if (pad.some((b) => b !== 0)) fail(`non-zero padding before tensor ${JSON.stringify(d.name)}`, padAt);
    const bodyAt = r.position;
    // The body goes into the record digest only; the stream digest covers that digest instead.
    // A byte-grouped body is decoded first: the record digest covers the tensor's own bytes.
    let body: Uint8Array;
    if (d.encoding) {
      // Read into the reader's scratch buffer: the stored bytes are decoded into a new one at once.
      const stored = await r.readBody(rh.bodyBytes, `tensor ${JSON.stringify(d.name)}`, undefined, true);
      body = await decodeTensorBody(d, stored, bodyAt);
      h.update(body);
    } else body = await r.readBody(rh.bodyBytes, `tensor ${JSON.stringify(d.name)}`, h);
    await checkDigest(h, `tensor ${JSON.stringify(d.name)}`, at);
    const data = typedArrayFrom(d.dtype, body);
    if (d.dtype === "bool") checkBools(data as Uint8Array, d.name, `at offset ${bodyAt}`);
    const { name, dtype, shape, group } = d;
    seen.push(indexEntry(d, at, r.position - at));
    yield { type: "tensor", tensor: { name, dtype, shape, group, data } };
  }
}

/**
 * ckpt's binary codec. Detects its bytes by the magic `\x89CKPT\r\n\x1a`.
 *
 * @example
 * ```ts
 * import { binaryCodec } from "./binary.ts";
 * import assert from "node:assert/strict";
 * const enc = binaryCodec.encoder();
 * const w = enc.writable.getWriter();
 * w.write({ type: "metadata", metadata: { step: 1 } });
 * w.close();
 * const bytes = new Uint8Array(await new Response(enc.readable).arrayBuffer());
 * assert.ok(binaryCodec.detect(bytes));
 * assert.equal(bytes.byteLength % 8, 0);
 * ```
 */
export const binaryCodec: Codec = Object.freeze({
  name: "binary",
  detect(head: Uint8Array): boolean {
    return head.byteLength >= BINARY_MAGIC.length && BINARY_MAGIC.every((b, i) => head[i] === b);
  },
  encoder(options?: EncoderOptions): CheckpointEncoder {
    const byteGroup = options?.compression === "bytegroup";
    const transient = options?.transientChunks ?? false;
    return digestingEncoder(
      (records, settle) => encodeRecords(records, settle, byteGroup, transient),
      options?.digest ?? true,
    );
  },
  decoder(limits?: DecoderOptions): CheckpointDecoder {
    return digestingDecoder((chunks, digest) => decodeRecords(chunks, limits, undefined, digest));
  },
  readTensors(source: RandomAccessReader, names: readonly string[], limits?: DecodeLimits): Promise<Checkpoint> {
    return readTensorsByName(source, names, limits);
  },
});
