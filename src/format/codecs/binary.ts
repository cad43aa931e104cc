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
import { bytesOf } from "../dtype.ts";
import type { DecodeLimits } from "../limits.ts";
import { metadataToJson } from "../metadata.ts";
import type { Checkpoint, CheckpointRecord } from "../types.ts";
import { readTensorsByName } from "./binary_file.ts";
import { type Hash, hasNativeDigest, hasWebDigest, nativeDigest, sha256, toHex, webDigest } from "../_hash.ts";
import { headroomOf } from "../_headroom.ts";
import { digestingDecoder, digestingEncoder, type EncoderDigests } from "../_pair.ts";
import { EncodeGuard } from "../_encode_guard.ts";
import { BYTEGROUP_ENCODING, planByteGroups, PlaneScratch } from "./_bytegroup.ts";
import { decodeRecords, OFF_THREAD_MIN } from "./_binary_decoder.ts";
import {
  BINARY_MAGIC,
  DIGEST_BYTES,
  encodeFooter,
  encodeHeader,
  encodeRecordPrefix,
  FLAG_BYTEGROUP,
  type IndexEntry,
  indexEntry,
  RecordKind,
  tensorHead,
  utf8,
} from "./_binary_layout.ts";

export { decodeRecords, type DecodeRecordsOptions, setRangeHashForTests } from "./_binary_decoder.ts";
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
  prefixRoom,
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
  const scratch = byteGroup ? PlaneScratch.acquire() : undefined;
  // The record digest of the tensor before, computed off this thread (a byte-grouped tensor's on
  // the native thread from a copy of its bytes while this thread codes it; a large raw one's
  // natively or by WebCrypto while its body is written) and written (with its index entry) once
  // the next record's digest has started, before anything after it.
  let held: { job: Promise<Uint8Array>; entry: () => IndexEntry } | undefined;
  // The last job started (the next one's, while the held one is written).
  let latest: Promise<Uint8Array> | undefined;
  let copyTurn = 0;
  const native = scratch !== undefined && hasNativeDigest();
  // In a page, where a raw record of a caller's array is copied whole for one WebCrypto call.
  const recordCopy = new RecordCopy();
  async function* release(): AsyncGenerator<Uint8Array> {
    if (!held) return;
    const { job, entry } = held;
    held = undefined;
    yield emit(await job);
    index.push(entry());
  }
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
      const body = bytesOf(t.data);
      // Planned (its size known from byte counts) before it is split and coded, so that its
      // record digest can start on the native thread first and run while this thread codes it.
      const plan = scratch ? planByteGroups(t.dtype, body, { scratch, transient }) : undefined;
      // The held tensor's digest goes out first.
      const start = position + (held ? DIGEST_BYTES : 0);
      const encoding = plan ? BYTEGROUP_ENCODING : undefined;
      const head = tensorHead(t, encoding);
      const prefix = encodeRecordPrefix(RecordKind.tensor, head, plan?.byteLength ?? body.byteLength, start);
      const group = t.group ?? "params";
      const entry = () => indexEntry({ ...t, shape: [...t.shape], group, encoding }, start, position - start);
      // A copy of the bytes for the native thread (ckpt's own memory stays alive while it reads;
      // the caller's buffer may change once this yields), hashed there from now on; should the
      // thread fail, this one hashes the copy instead (the same digest).
      const copy = plan && native && body.byteLength >= OFF_THREAD_MIN && body.byteLength <= COPY_MAX
        ? scratch!.take(COPY_SCRATCH + (copyTurn ^= 1), body.byteLength)
        : undefined;
      copy?.set(body);
      const job = copy && nativeDigest([prefix, copy])!.catch(() => sha256().update(prefix).update(copy).digest());
      latest = job;
      // Split before this yields (the caller's buffer may change then); each deflated plane is
      // coded as the parts reach it, while the stored ones before it are written.
      const parts = plan?.parts();
      // A large raw tensor's record digest runs off this thread while its body is written, this
      // thread only handing the body on (see recordDigest); started before the held digest before
      // it is awaited, so that the two hashes overlap (a page's writer that takes the body at
      // once, as one writing through a worker does, would otherwise wait for each digest in turn).
      const offThread = parts ? undefined : recordDigest(prefix, body, recordCopy);
      if (offThread) latest = offThread.job; // awaited however this ends, from now on
      yield* release();
      if (position !== start) throw new Error(`binary encoder: record at ${position}, its prefix says ${start}`);
      if (job) {
        held = { job, entry };
        yield emit(prefix);
        for (const part of parts!) yield emit(part, undefined, true);
        continue;
      }
      if (offThread) {
        held = { job: offThread.job, entry };
        yield emit(offThread.prefix);
        for (let i = 0; i < body.byteLength; i += BODY_SLICE) {
          yield emit(body.subarray(i, Math.min(body.byteLength, i + BODY_SLICE)), undefined, true);
        }
        continue;
      }
      const h = sha256();
      yield emit(prefix, h);
      if (parts) {
        // The record digest covers the tensor's own bytes, so a reader checks what it decoded.
        h.update(body);
        for (const part of parts) yield emit(part, undefined, true);
      } else {
        // Each slice is hashed once it has been handed on: a consumer that reads ahead (saveCheckpoint
        // does) resumes this generator while the slice is being written, so the hash of a slice runs
        // during its write instead of between two writes.
        for (let i = 0; i < body.byteLength; i += BODY_SLICE) {
          const slice = body.subarray(i, Math.min(body.byteLength, i + BODY_SLICE));
          yield emit(slice, undefined, true);
          h.update(slice);
        }
      }
      yield emit(new Uint8Array(h.digest()));
      index.push(entry());
    }
    guard.end();
    yield* release();
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
  } finally {
    // Jobs still reading a copy: the copies go back to the idle scratches only once they are done.
    await Promise.all([held?.job, latest].map((job) => job?.catch(() => {})));
    scratch?.release();
  }
}

/**
 * Smallest raw body hashed with one WebCrypto call over its record (as a load does).
 *
 * @example
 * ```ts
 * import { WEB_RECORD_MIN } from "./binary.ts";
 * import assert from "node:assert/strict";
 * assert.equal(WEB_RECORD_MIN, 2 ** 20);
 * ```
 */
export const WEB_RECORD_MIN: number = 2 ** 20;

/**
 * The record of a raw tensor laid out whole in its buffer (the prefix written into the room
 * reserved in front of the body), where the page has WebCrypto, the body is large enough and
 * has that room; `undefined` otherwise.
 */
function webRecord(prefix: Uint8Array, body: Uint8Array): Uint8Array | undefined {
  if (body.byteLength < WEB_RECORD_MIN || headroomOf(body) < prefix.byteLength || !hasWebDigest()) return undefined;
  const whole = new Uint8Array(body.buffer, body.byteOffset - prefix.byteLength, prefix.byteLength + body.byteLength);
  whole.set(prefix);
  return whole;
}

/**
 * Largest raw record (prefix and body) of a caller's array that a page copies whole to hash it
 * with one WebCrypto call: the copy is the memory such a save adds (one buffer, reused for every
 * record: WebCrypto copies its input when called), so it stays a few MiB; larger records keep the
 * incremental WebAssembly hash.
 *
 * @example
 * ```ts
 * import { prefixRoom, WEB_COPY_MAX } from "./binary.ts";
 * import assert from "node:assert/strict";
 * // A 4 MiB float32 tensor's record is copied; one 64 KiB larger is not.
 * const record = (n: number) => prefixRoom({ name: "w", dtype: "float32", shape: [n] }) + n * 4;
 * assert.ok(record(2 ** 20) <= WEB_COPY_MAX);
 * assert.ok(record(2 ** 20 + 2 ** 14) > WEB_COPY_MAX);
 * ```
 */
export const WEB_COPY_MAX: number = 4 * 2 ** 20 + 64 * 1024;

/**
 * The one buffer a page's save copies records into for WebCrypto ({@linkcode WEB_COPY_MAX} at
 * most), grown to the largest record copied so far; it goes with the encoder.
 */
class RecordCopy {
  #buffer: Uint8Array | undefined;

  /** `prefix` then `body`, laid out whole in the buffer; valid until the next call. */
  whole(prefix: Uint8Array, body: Uint8Array): Uint8Array {
    const size = prefix.byteLength + body.byteLength;
    if (!this.#buffer || this.#buffer.byteLength < size) this.#buffer = new Uint8Array(size);
    this.#buffer.set(prefix);
    this.#buffer.set(body, prefix.byteLength);
    return this.#buffer.subarray(0, size);
  }
}

/**
 * The record digest of a raw tensor of 1 MiB or more, started off this thread, with the prefix to
 * emit; `undefined` where it is hashed here (small, or no native SHA-256). In a page, where the
 * body has room in front of it (a snapshot's buffers), one WebCrypto call over the record laid out
 * whole there; where it has none (a caller's own array) and the record is at most
 * {@linkcode WEB_COPY_MAX}, one WebCrypto call over a copy of it in `copy`'s buffer (WebAssembly
 * hashed 256 MiB in 1.1-1.5 s in the three engines, WebCrypto in 0.2-0.35 s, and the copy is
 * reused at once: WebCrypto copies its input when called; should the call fail, the caller's
 * bytes are hashed here instead); with libcrypto (FFI granted), the prefix and the body where they lie, while this
 * thread only copies the body into the writer's staging buffers (a save to a file was bound by
 * this thread's hash: its direct writes of 8 MiB took 3.5 ms, each 8 MiB hashed and staged 5-8).
 * Neither copies the body: a save reads it while it is written either way, and the caller keeps
 * its tensors unchanged until the save settles (ckpt's own savers own theirs: a snapshot's, the
 * buffers moved to a `BackgroundWriter`); a body changed meanwhile fails its record digest when
 * read. The encoder waits for the job before it ends, whatever ends it, so the buffer outlives
 * it. A native hash that fails is done here instead, over the same bytes.
 */
function recordDigest(
  prefix: Uint8Array,
  body: Uint8Array,
  copy: RecordCopy,
): { prefix: Uint8Array; job: Promise<Uint8Array> } | undefined {
  const whole = webRecord(prefix, body);
  if (whole) {
    return {
      prefix: whole.subarray(0, prefix.byteLength),
      job: webDigest(whole)!.catch(() => sha256().update(whole).digest()),
    };
  }
  if (
    body.byteLength >= WEB_RECORD_MIN && prefix.byteLength + body.byteLength <= WEB_COPY_MAX && hasWebDigest()
  ) {
    const job = webDigest(copy.whole(prefix, body))!.catch(() => sha256().update(prefix).update(body).digest());
    return { prefix, job };
  }
  // A resizable buffer could shrink under the native thread: hashed here.
  const resizable = (body.buffer as ArrayBuffer & { resizable?: boolean }).resizable === true;
  if (body.byteLength < OFF_THREAD_MIN || resizable || !hasNativeDigest()) return undefined;
  const job = nativeDigest([prefix, body])!.catch(() => sha256().update(prefix).update(body).digest());
  return { prefix, job };
}

/** The encoder's {@linkcode PlaneScratch} buffers (after every plane's and deflate output's) for copies hashed on the native thread. */
const COPY_SCRATCH = 16;
/**
 * Larger tensors are hashed on this thread: two copies of this size at most (one being hashed,
 * one being made) is all the memory the native thread adds to a save.
 */
const COPY_MAX = 16 * 2 ** 20;

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
