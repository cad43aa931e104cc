// The binary codec's decoder: bytes (a chunk sequence or an open file) to records. One small step
// per part of the format, in the order the bytes come: the file header (where the fast paths are
// chosen, once, from what the source and the runtime can do), then each record's header and head,
// and by its kind the metadata, a tensor (its checks, then its body by one route), or the index
// and the footer. What is held back while another thread hashes or decodes a tensor is handed out
// in order by `HandOut` (_binary_hand_out.ts).
import { ChecksumMismatchError } from "../errors.ts";
import { concatBytes, DTYPES, typedArrayFrom } from "../dtype.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import { metadataFromJson } from "../metadata.ts";
import type { CheckpointRecord } from "../types.ts";
import type { DecoderOptions } from "../codec.ts";
import { type ByteReader, type EncodedBody, isByteReader, type RangeHasher } from "../_byte_reader.ts";
import { ChunkReader } from "../_chunk_reader.ts";
import { type IntoBuffers, intoBytes } from "../_read_into.ts";
import {
  equalBytes,
  type Hash,
  type HashThread,
  hashThreadDue,
  hasNativeDigest,
  hasWebDigest,
  nativeDigest,
  sha256,
  startHashThread,
  toHex,
  webDigest,
} from "../_hash.ts";
import type { Settle } from "../_pair.ts";
import { takeDigest } from "../_known_digests.ts";
import { PlaneScratch } from "./_bytegroup.ts";
import {
  checkBodyLength,
  checkBools,
  checkDescriptor,
  checkIndex,
  decodeFooter,
  decodeHeader,
  decodeRecordHeader,
  decodeTensorBody,
  decodeTensorBodyParts,
  DIGEST_BYTES,
  fail,
  FLAG_BYTEGROUP,
  FOOTER_BYTES,
  HEADER_BYTES,
  type IndexEntry,
  indexEntry,
  padTo,
  parseJson,
  RECORD_HEADER_BYTES,
  type RecordHeader,
  RecordKind,
  type TensorDescriptor,
} from "./_binary_layout.ts";
import { HandOut, prepend, type Tensorish } from "./_binary_hand_out.ts";

/** Tensor bodies from this size on may be hashed on the second thread (smaller ones are hashed faster than handed over). */
export const OFF_THREAD_MIN = 2 ** 20;
/**
 * Raw tensors a load from a file keeps on the native thread at once while it reads the next one
 * (see {@linkcode decodeRecords}): each job runs on a thread of its own in the runtime's blocking
 * pool, so the tensors' hashes (one core each) run side by side and beside the read. One at a
 * time, a 512 MiB load of 16 MiB tensors was bound by one core's SHA-256; with two, 283 against
 * 302-327 ms here (2 cores, alternating in one process; three and more: even). One per core, at
 * least two, at most four, and {@linkcode NATIVE_WINDOW_BYTES} at most.
 */
const NATIVE_WINDOW = Math.min(4, Math.max(2, globalThis.navigator?.hardwareConcurrency ?? 2));
/**
 * Bytes of the tensors on the native thread at once, at most, unless one alone is larger: a
 * streaming reader holds them (and the one it reads) before they come out, so tensors larger than
 * half of this go there one at a time, as before the window (two alive at once).
 */
const NATIVE_WINDOW_BYTES = 64 * 2 ** 20;
/** A verified tensor's data when bodies are only hashed: an empty array of its dtype. */
const NO_BYTES = new Uint8Array(0);
/**
 * A verify, or a load without `reuseBuffers` of a byte-grouped file (of any file with
 * `parallelHash: true`), from this size on starts a second thread that reads and hashes every
 * other body of at least RANGE_BODY_MIN bytes itself, decoding a byte-grouped one first
 * ({@linkcode RangeHasher}), while this thread moves past the body (a verify, or a byte-grouped
 * body) or reads it into its buffer (a raw body in a load): its start blocks this thread 30 ms and
 * it is up after about 60, which a smaller file does not win back.
 */
const RANGE_FILE_MIN = 64 * 2 ** 20;
const RANGE_BODY_MIN = 2 ** 20;
let rangeFileMin = RANGE_FILE_MIN;
let rangeWaitReady = false;
/** Whether a test set the range hasher's policy: then a load takes it, not the native thread. */
let rangeForced = false;

/**
 * Test hook: from which file size a read starts its range hasher, and whether it waits for it
 * to be up before the first tensor (so which tensors go to it is certain); `"restore"` undoes it.
 */
export function setRangeHashForTests(policy: { fileMin?: number; waitReady?: boolean } | "restore"): void {
  rangeForced = policy !== "restore";
  rangeFileMin = policy === "restore" ? RANGE_FILE_MIN : policy.fileMin ?? rangeFileMin;
  rangeWaitReady = policy === "restore" ? false : policy.waitReady ?? rangeWaitReady;
}
/**
 * With `reuseBuffers`, only bodies up to this size go there: the second thread's tensors have a
 * buffer of their own, so this caps what the second buffer adds to a one-pass reader's memory.
 */
const OFF_THREAD_MAX = 64 * 2 ** 20;
/** The {@linkcode PlaneScratch} buffers (after any plane's) that deferred byte-grouped bodies are read into. */
const BODY_SCRATCH = 8;

/** Whether a read hashes its large tensors on the native thread (FFI granted): a load into fresh buffers. */
function nativeLoads(bodies: "keep" | "hash", options: Pick<DecoderOptions, "reuseBuffers" | "parallelHash">): boolean {
  return bodies === "keep" && !options.reuseBuffers && options.parallelHash !== false && !rangeForced &&
    hasNativeDigest();
}

/**
 * Whether a read hashes each raw tensor of {@linkcode OFF_THREAD_MIN} or more with one WebCrypto
 * call over its record (`webRaw`): a load into fresh buffers in a page. Its reader may have
 * computed those digests ahead, on another thread ({@linkcode takeDigest}).
 */
export function webLoads(
  bodies: "keep" | "hash",
  options: Pick<DecoderOptions, "reuseBuffers" | "parallelHash">,
): boolean {
  return bodies === "keep" && !options.reuseBuffers && options.parallelHash !== false &&
    !nativeLoads(bodies, options) && hasWebDigest();
}

/** What to decode, how the records' bodies are kept, and who sees the bytes. */
export type DecodeRecordsOptions = DecoderOptions & { into?: IntoBuffers };

/** A record's first bytes: where it starts, its header and its head (both already in `h`, its digest so far). */
interface RecordStart {
  at: number;
  h: Hash;
  recordHeader: Uint8Array;
  rh: RecordHeader;
  headAt: number;
  head: Uint8Array;
}

/** A tensor record checked up to its body. */
interface TensorAt extends RecordStart, Tensorish {
  /** The zero padding before the body (in `h`). */
  pad: Uint8Array;
  /** The caller's buffer for this tensor (`loadCheckpoint`'s `into`), if it gave one. */
  target: Uint8Array | undefined;
  /** The caller's buffer for a raw body: read from a file straight into it; anything else is copied there once verified. */
  rawInto: (() => Uint8Array) | undefined;
}

/**
 * How a tensor's body is read and verified, chosen per tensor by {@linkcode BinaryDecoder.route}
 * from the paths the file header opened and what is busy:
 * - `rangeVerify`: a verify's raw body, read and hashed by the range thread from the file;
 * - `hashPieces`: a verify's raw body, hashed here piece by piece through two small buffers;
 * - `rangeDecode`: a byte-grouped body, read, decoded and hashed by the range thread;
 * - `defer`: a load's large byte-grouped body, read while the one before it is decoded (and
 *   hashed: on the native thread, by WebCrypto in a page, or here);
 * - `decodeParts`: a verify's large byte-grouped body, decoded a part at a time, each part hashed
 *   on the native thread while this thread decodes the next;
 * - `decode`: a byte-grouped body, decoded and hashed here;
 * - `rangeRaw`: a raw body read here while the range thread hashes the same bytes from the file;
 * - `nativeRaw`: a raw body read here, hashed on the native thread while the next is read;
 * - `webRaw`: in a page, a raw body read here with room for its record's prefix before it,
 *   hashed by WebCrypto (one call over the record's bytes) while the next is read;
 * - `raw`: a raw body read here and hashed here, or on the hash thread once that is up.
 */
type Route =
  | "rangeVerify"
  | "hashPieces"
  | "rangeDecode"
  | "defer"
  | "decodeParts"
  | "decode"
  | "rangeRaw"
  | "nativeRaw"
  | "webRaw"
  | "raw";

/** A tensor's record from its verified body bytes. */
function finish(t: Tensorish, body: Uint8Array): CheckpointRecord {
  const { name, dtype, shape, group } = t.d;
  const data = typedArrayFrom(dtype, body);
  if (dtype === "bool") checkBools(data as Uint8Array, name, `at offset ${t.bodyAt}`);
  return { type: "tensor", tensor: { name, dtype, shape, group, data } };
}

/** What a tensor verified but not kept is handed out as: its data an empty array. */
function hollow(t: Tensorish): CheckpointRecord {
  const { name, dtype, shape, group } = t.d;
  return { type: "tensor", tensor: { name, dtype, shape, group, data: typedArrayFrom(dtype, NO_BYTES) } };
}

/** One view over `parts` where they lie one after the other in one buffer; `undefined` where they do not. */
function together(parts: Uint8Array[]): Uint8Array | undefined {
  const first = parts[0]!;
  let end = first.byteOffset;
  for (const p of parts) {
    if (p.byteLength === 0) continue; // (no padding: an empty array of its own)
    if (p.buffer !== first.buffer || p.byteOffset !== end) return undefined;
    end += p.byteLength;
  }
  return new Uint8Array(first.buffer, first.byteOffset, end - first.byteOffset);
}

/** The record's bytes before the body, as read (views the reader may reuse). */
const prefixParts = (t: TensorAt): Uint8Array[] => [t.recordHeader, t.head, t.pad];

/** The decoder of one binary stream; {@linkcode BinaryDecoder.records} runs it once. */
export class BinaryDecoder {
  readonly #input: AsyncIterable<Uint8Array> | ByteReader;
  readonly #lim: Required<DecodeLimits>;
  readonly #into: IntoBuffers | undefined;
  readonly #reuse: boolean;
  readonly #parallel: boolean | undefined;
  readonly #tap: Hash | undefined;
  readonly #digest: Settle<string> | undefined;
  readonly #bodies: "keep" | "hash";
  readonly #r: ChunkReader;
  /** Every byte before the footer but tensor bodies (their record digests stand in). */
  readonly #stream = sha256();
  /** A verify decodes byte-grouped bodies into one buffer, reused from one tensor to the next. */
  readonly #decoded: PlaneScratch;
  /** Any decoder inflates planes into buffers reused likewise. */
  readonly #planes: PlaneScratch;
  readonly #out: HandOut;
  readonly #seen: IndexEntry[] = [];
  readonly #names = new Set<string>();
  #sawMetadata = false;
  #flags = 0;

  // The fast paths, chosen with the file header (see `#choosePaths`).
  /** Large tensors hashed on the native thread while this thread reads or decodes the next. */
  #nativeLoad = false;
  /** Large byte-grouped bodies read while the one before is decoded. */
  #deferLoad = false;
  /** Raw bodies read from a file hashed on the native thread. */
  #nativeRaw = false;
  /** In a page, large raw bodies hashed by WebCrypto once read whole, while this thread reads the next. */
  #webLoad = false;
  /** A second thread that reads and hashes (and decodes) every other large body of a large file itself. */
  #ranger: RangeHasher | undefined;

  /** Started once enough large bodies came to make it worth its start; takes tensors once it is up. */
  #thread: HashThread | undefined;
  #threadStarted = false;
  #largeBytes = 0;
  /** With reuseBuffers, tensors hashed on the hash thread share this buffer; the others the reader's own. */
  #sideBuffer: ArrayBuffer | undefined;
  /** The read of a deferred body, in flight while the one before it is decoded: it fills a buffer of `planes`. */
  #reading: Promise<unknown> | undefined;
  #bodyTurn = 0;

  /**
   * `input` is a chunk sequence or an open file (then bodies are read straight into their final
   * buffers, and `tap`, if given, sees every byte of the file); `digest` gets the stream digest
   * once the footer checked out; `bodies: "hash"` verifies tensors without keeping them.
   */
  constructor(
    input: AsyncIterable<Uint8Array> | ByteReader,
    limits: DecodeRecordsOptions | undefined,
    tap: Hash | undefined,
    digest: Settle<string> | undefined,
    bodies: "keep" | "hash",
  ) {
    this.#input = input;
    this.#lim = resolveLimits(limits);
    this.#into = limits?.into;
    this.#reuse = limits?.reuseBuffers ?? false;
    this.#parallel = limits?.parallelHash;
    this.#tap = tap;
    this.#digest = digest;
    this.#bodies = bodies;
    this.#r = new ChunkReader(input, "checkpoint", this.#reuse, tap);
    // Last: given back by `records`, however it ends.
    this.#decoded = PlaneScratch.acquire();
    this.#planes = PlaneScratch.acquire();
    this.#out = new HandOut(this.#r, this.#planes);
  }

  /** The records: the metadata, then each tensor once its digest matched; ends after the footer checked out. */
  async *records(): AsyncGenerator<CheckpointRecord> {
    try {
      await this.#fileHeader();
      for (;;) {
        const record = await this.#recordStart();
        if (record.rh.kind === RecordKind.metadata) {
          yield await this.#metadata(record);
          continue;
        }
        if (!this.#sawMetadata) fail(`record kind ${record.rh.kind} before the metadata record`, record.at);
        if (record.rh.kind === RecordKind.index) {
          yield* this.#out.settle();
          await this.#index(record);
          await this.#footer(record.at);
          return;
        }
        yield* this.#tensor(await this.#tensorAt(record));
      }
    } catch (e) {
      // What was read before the error comes out first, in order (tensors held back included); a
      // tensor still being verified, or decoded, comes first in the stream: its error, if any, is
      // the one to report.
      yield* this.#out.settle();
      throw e;
    } finally {
      await this.#reading?.catch(() => {});
      await this.#out.close();
      this.#thread?.close();
      this.#ranger?.close();
      this.#decoded.release();
      this.#planes.release();
    }
  }

  // ---- bytes, digests --------------------------------------------------------------------------

  /** The next `n` bytes, added to the stream digest (and to `record`'s, if given). */
  async #read(n: number, what: string, record?: Hash): Promise<Uint8Array> {
    const b = await this.#r.readExact(n, what);
    this.#stream.update(b);
    record?.update(b);
    return b;
  }

  /** Reads the stored record digest and checks `h` against it. */
  async #checkDigest(h: Hash, subject: string, at: number): Promise<void> {
    const stored = await this.#read(DIGEST_BYTES, `the digest of ${subject}`);
    const actual = h.digest();
    if (!equalBytes(actual, stored)) {
      throw new ChecksumMismatchError(subject, toHex(stored), toHex(actual), `at offset ${at}`);
    }
  }

  /** Checks a tensor hashed here (its body in `t.h`) and notes its index entry. */
  async #checkTensor(t: TensorAt): Promise<void> {
    await this.#checkDigest(t.h, t.subject, t.at);
    this.#seen.push(indexEntry(t.d, t.at, this.#r.position - t.at));
  }

  /** A tensor's stored digest, for another thread's result (a copy: the reader may reuse its bytes). */
  async #storedDigest(t: TensorAt): Promise<Uint8Array> {
    const stored = (await this.#read(DIGEST_BYTES, `the digest of ${t.subject}`)).slice();
    this.#seen.push(indexEntry(t.d, t.at, this.#r.position - t.at));
    return stored;
  }

  // ---- the file header: the fast paths, chosen once ----------------------------------------------

  async #fileHeader(): Promise<void> {
    this.#flags = decodeHeader(await this.#read(HEADER_BYTES, "the header"));
    await this.#choosePaths((this.#flags & FLAG_BYTEGROUP) !== 0);
  }

  /**
   * Which second threads this read uses, from what the source and the runtime can do: the native
   * hash thread (FFI granted), a range hasher (a large file in Deno), the deferred decode of
   * byte-grouped bodies. With reuseBuffers a body's buffer is overwritten by the next: it could
   * not wait for another thread.
   */
  async #choosePaths(grouped: boolean): Promise<void> {
    const keep = this.#bodies === "keep";
    const reuse = this.#reuse;
    const parallel = this.#parallel;
    // By default for a verify, and for a load of a byte-grouped file (decoding is work two threads
    // share); a load of raw bodies only with parallelHash: true, as it measured slower as often as
    // faster (README, "Performance").
    const ranges = keep ? !reuse && (parallel === true || (parallel === undefined && grouped)) : parallel !== false;
    // A load into fresh buffers hashes each large tensor on the native thread where there is one
    // (nothing to start), while this thread reads or decodes the next; then it starts no range
    // hasher (a 256 MiB byte-grouped load took 383-445 ms so against 480-630 with one), and it
    // takes none with one thread asked for.
    this.#nativeLoad = nativeLoads(this.#bodies, { reuseBuffers: reuse, parallelHash: parallel });
    // In a page (no native thread, no range hasher), WebCrypto takes the place of the native
    // thread for raw bodies: a native SHA-256, one call per record.
    this.#webLoad = webLoads(this.#bodies, { reuseBuffers: reuse, parallelHash: parallel });
    this.#out.nativeLoad = this.#nativeLoad;
    this.#out.holdFollowers = this.#nativeLoad || this.#webLoad;
    this.#out.webLoad = this.#webLoad;
    const input = this.#input;
    if (ranges && !this.#nativeLoad && !this.#tap && isByteReader(input) && input.rangeHasher) {
      if ((await input.stat()).size >= rangeFileMin) this.#ranger = await input.rangeHasher();
      if (this.#ranger && rangeWaitReady) await this.#ranger.up;
    }
    // A load into fresh buffers reads each byte-grouped body while the one before it is decoded
    // (and hashed, here or on the native thread), unless the range hasher takes every other one.
    this.#deferLoad = keep && !reuse && (this.#nativeLoad || (!this.#ranger && !rangeForced));
    // Its buffers must be ours: decoded bodies always are, raw ones when read from a file (from
    // a chunk sequence a body may be a view into the caller's chunk).
    this.#nativeRaw = this.#nativeLoad && isByteReader(input);
  }

  // ---- records -----------------------------------------------------------------------------------

  /** A record's header and head. */
  async #recordStart(): Promise<RecordStart> {
    const at = this.#r.position;
    const h = sha256();
    const recordHeader = await this.#read(RECORD_HEADER_BYTES, "a record header", h);
    const rh = decodeRecordHeader(recordHeader, at, this.#lim);
    const headAt = this.#r.position;
    const head = await this.#read(rh.headBytes, "a record head", h);
    return { at, h, recordHeader, rh, headAt, head };
  }

  async #metadata({ at, h, headAt, head }: RecordStart): Promise<CheckpointRecord> {
    if (this.#sawMetadata) fail("second metadata record", at);
    const metadata = metadataFromJson(parseJson(head, "metadata", headAt), `at offset ${headAt}`);
    await this.#checkDigest(h, "metadata", at);
    this.#sawMetadata = true;
    return { type: "metadata", metadata };
  }

  /** The index: verified, and the same entries as the tensors read. */
  async #index({ at, h, headAt, head }: RecordStart): Promise<void> {
    const entries = checkIndex(parseJson(head, "index", headAt), `at offset ${headAt}`, this.#lim);
    await this.#checkDigest(h, "index", at);
    if (JSON.stringify(entries) !== JSON.stringify(this.#seen)) {
      fail("index does not match the tensors in the stream", at);
    }
  }

  /** The footer: it points to the index at `indexAt`, holds the stream digest, and ends the bytes. */
  async #footer(indexAt: number): Promise<void> {
    const r = this.#r;
    const footerAt = r.position;
    const expected = this.#stream.digest();
    const footer = decodeFooter(await r.readExact(FOOTER_BYTES, "the footer"), footerAt);
    if (footer.indexOffset !== indexAt) {
      fail(`footer points to index at ${footer.indexOffset}, found it at ${indexAt}`, footerAt);
    }
    if (!equalBytes(expected, footer.digest)) {
      throw new ChecksumMismatchError("stream", toHex(footer.digest), toHex(expected), `at offset ${footerAt + 8}`);
    }
    if (!(await r.atEnd())) fail("trailing bytes after the footer", r.position);
    this.#digest?.resolve(toHex(footer.digest));
  }

  /** A tensor record's descriptor and padding, checked; the reader is then at its body. */
  async #tensorAt(record: RecordStart): Promise<TensorAt> {
    const { at, h, rh, headAt, head } = record;
    const lim = this.#lim;
    if (this.#seen.length >= lim.maxTensors) {
      throw new RangeError(`Cannot decode checkpoint: more than maxTensors ${lim.maxTensors} tensors at offset ${at}`);
    }
    const d: TensorDescriptor = checkDescriptor(
      parseJson(head, "tensor descriptor", headAt),
      `at offset ${headAt}`,
      lim,
      true,
    );
    if (this.#names.has(d.name)) fail(`duplicate tensor name ${JSON.stringify(d.name)}`, headAt);
    this.#names.add(d.name);
    checkBodyLength(d, rh.bodyBytes, this.#flags, at);
    const padAt = this.#r.position;
    const pad = await this.#read(padTo(padAt), "padding", h);
    if (pad.some((b) => b !== 0)) fail(`non-zero padding before tensor ${JSON.stringify(d.name)}`, padAt);
    const target = this.#bodies === "keep" ? intoBytes(this.#into, d.name, d.byteLength) : undefined;
    return {
      ...record,
      d,
      pad,
      bodyAt: this.#r.position,
      subject: `tensor ${JSON.stringify(d.name)}`,
      target,
      rawInto: target && !d.encoding ? () => target : undefined,
    };
  }

  /** A tensor's body, by its route. */
  async *#tensor(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    switch (await this.#route(t)) {
      case "rangeVerify":
        return await this.#onRangeThread(t, () => hollow(t));
      case "hashPieces":
        return yield* this.#hashPieces(t);
      case "rangeDecode":
        return await this.#rangeDecode(t);
      case "defer":
        return yield* this.#defer(t);
      case "decodeParts":
        return yield* this.#decodeParts(t);
      case "decode":
        return yield* this.#decode(t);
      case "rangeRaw":
        return await this.#rangeRaw(t);
      case "nativeRaw":
        return yield* this.#nativeRawBody(t);
      case "webRaw":
        return yield* this.#webRawBody(t);
      case "raw":
        return yield* this.#raw(t);
    }
  }

  /**
   * The route of a tensor's body. The body goes into the record digest only; the stream digest
   * covers that digest instead. A byte-grouped body is decoded first: the record digest covers
   * the tensor's own bytes. Another thread takes a tensor only while none is held back, so that
   * they come out in order; the range thread only a body the reader could move past.
   */
  async #route(t: TensorAt): Promise<Route> {
    const { d, rh } = t;
    const verify = this.#bodies === "hash";
    const ranger = this.#ranger;
    const free = () => !this.#out.held();
    const skip = () => rh.bodyBytes >= RANGE_BODY_MIN && this.#r.skipBody(rh.bodyBytes, t.subject);
    if (verify && !d.encoding) {
      return ranger?.ready && free() && d.dtype !== "bool" && await skip() ? "rangeVerify" : "hashPieces";
    }
    if (d.encoding && ranger?.ready && ranger.decode && free() && (verify || !this.#reuse) && await skip()) {
      return "rangeDecode";
    }
    if (d.encoding) {
      if (this.#deferLoad && d.byteLength >= OFF_THREAD_MIN) return "defer";
      // (Not beside a range hasher, which takes the second core: 128 MiB verifies 0.79x so.)
      const parts = verify && this.#parallel !== false && !ranger && d.byteLength >= OFF_THREAD_MIN &&
        hasNativeDigest();
      return parts ? "decodeParts" : "decode";
    }
    if (ranger?.ready && free() && !this.#reuse && rh.bodyBytes >= RANGE_BODY_MIN) return "rangeRaw";
    if (this.#nativeRaw && rh.bodyBytes >= OFF_THREAD_MIN) return "nativeRaw";
    if (this.#webLoad && rh.bodyBytes >= OFF_THREAD_MIN) return "webRaw";
    return "raw";
  }

  // ---- routes: a verify's raw body ---------------------------------------------------------------

  /** Verified, not kept: hashed piece by piece through two small reused buffers. */
  async *#hashPieces(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const { name, dtype } = t.d;
    const where = `at offset ${t.bodyAt}`;
    const bools = dtype === "bool" ? (p: Uint8Array, o: number) => checkBools(p, name, where, o) : undefined;
    await this.#r.hashBody(t.rh.bodyBytes, t.subject, t.h, bools);
    await this.#checkTensor(t);
    yield* this.#out.settle();
    yield hollow(t);
  }

  // ---- routes: the range thread ------------------------------------------------------------------

  /**
   * The range thread hashes this record's prefix and its body (which this thread has moved past,
   * or read into its buffer), decoding a byte-grouped one first when `decode` is given (`keep`:
   * its bytes come back); `record` is handed out once that digest matched, before anything after it.
   */
  async #onRangeThread(
    t: TensorAt,
    record: (data?: Uint8Array) => CheckpointRecord,
    decode?: EncodedBody,
  ): Promise<void> {
    const side = this.#ranger!;
    const { bodyAt, rh } = t;
    const job = decode && side.decode
      ? side.decode(concatBytes(prefixParts(t)), bodyAt, rh.bodyBytes, decode)
      : side.digest(concatBytes(prefixParts(t)), bodyAt, rh.bodyBytes).then((digest) => ({ digest, data: undefined }));
    await this.#whenHashed(t, job, ({ data }) => record(data));
  }

  /** Read, decoded and hashed on the range thread; a load gets the decoded bytes back. */
  async #rangeDecode(t: TensorAt): Promise<void> {
    const keep = this.#bodies === "keep";
    const { name, dtype } = t.d;
    const count = t.d.byteLength / DTYPES[dtype].bytes;
    const record = (data?: Uint8Array) => keep ? finish(t, data!) : hollow(t);
    await this.#onRangeThread(t, record, { name, dtype, count, keep });
  }

  /** Read into its own buffer here while the range thread reads the same bytes from the file and hashes them. */
  async #rangeRaw(t: TensorAt): Promise<void> {
    const body = await this.#r.readBody(t.rh.bodyBytes, t.subject, undefined, t.rawInto);
    await this.#onRangeThread(t, () => finish(t, body));
  }

  /**
   * A tensor hashed (and perhaps decoded) on another thread by `job`: its stored digest is read
   * now, and `record` is handed out once the job's digest matched it, before anything after it.
   */
  async #whenHashed<T extends { digest: Uint8Array }>(
    t: TensorAt,
    job: Promise<T>,
    record: (done: T) => CheckpointRecord,
  ): Promise<void> {
    job.catch(() => {});
    const stored = await this.#storedDigest(t);
    this.#out.push(this.#out.matched(job, stored, t, record), t.d.byteLength);
  }

  // ---- routes: byte-grouped bodies ---------------------------------------------------------------

  /**
   * Read into one of two buffers while the tensor before it is decoded from the other (the read
   * runs on another thread), then deferred in turn: decoded while the next body is read.
   */
  async *#defer(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const prefix = concatBytes(prefixParts(t));
    const turn = this.#bodyTurn ^= 1;
    await this.#out.decoding; // the tensor before the one before this may still be decoded from that buffer
    const body = this.#r.readBody(
      t.rh.bodyBytes,
      t.subject,
      undefined,
      (n, room) => this.#planes.take(BODY_SCRATCH + turn, n + room),
    );
    this.#reading = body;
    body.catch(() => {});
    yield* this.#out.advance();
    const stored = await body;
    const digest = await this.#storedDigest(t);
    const { d, subject, at, bodyAt } = t;
    const slim = { d, subject, at, bodyAt }; // not the reader's bytes
    this.#out.defer({ t: slim, stored, prefix, digest, finish: (b) => finish(slim, b), after: [], afterBytes: 0 });
  }

  /**
   * A verify with a native thread: read into the reader's scratch buffer, decoded a part at a
   * time, each part hashed there while this thread decodes the next.
   */
  async *#decodeParts(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const prefix = concatBytes(prefixParts(t)); // before the read reuses them
    const stored = await this.#r.readBody(t.rh.bodyBytes, t.subject, undefined, "scratch");
    const into = (n: number) => this.#decoded.take(0, n);
    const { parts } = decodeTensorBodyParts(t.d, stored, t.bodyAt, into, this.#planes);
    const job = nativeDigest(prepend(prefix, parts))!.then((digest) => ({ digest }));
    // The stored digest is read once the job is done: the read may reuse `stored`'s buffer.
    await job.catch(() => {});
    const record = await this.#out.matched(job, await this.#storedDigest(t), t, () => hollow(t));
    yield* this.#out.settle();
    yield record;
  }

  /**
   * Read into the reader's scratch buffer and decoded at once, into a new buffer for a load, into
   * one reused from tensor to tensor for a verify; hashed here.
   */
  async *#decode(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const verify = this.#bodies === "hash";
    const stored = await this.#r.readBody(t.rh.bodyBytes, t.subject, undefined, "scratch");
    const into = verify ? (n: number) => this.#decoded.take(0, n) : (n: number) => this.#r.allocate(n);
    await this.#out.decoding; // the plane scratch is a deferred tensor's until its decode is done
    const body = await decodeTensorBody(t.d, stored, t.bodyAt, into, this.#planes);
    t.h.update(body);
    await this.#checkTensor(t);
    // Byte-grouped: floats only, no bools to check.
    yield* this.#out.handOut(verify ? hollow(t) : finish(t, body), t.d.byteLength);
  }

  // ---- routes: a load's raw body -----------------------------------------------------------------

  /**
   * On the native thread: the record's prefix (copied now: the reader may reuse its bytes) and
   * its tensor bytes, hashed while this thread goes on to the next tensor, beside the jobs of up
   * to NATIVE_WINDOW - 1 tensors before it and NATIVE_WINDOW_BYTES in all (older ones are handed
   * out first); this one comes out once its digest matched, before anything after it.
   */
  async *#nativeRawBody(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const prefix = concatBytes(prefixParts(t));
    const body = await this.#r.readBody(t.rh.bodyBytes, t.subject, undefined, t.rawInto);
    const job = nativeDigest([prefix, body])!;
    this.#out.track(job).catch(() => {});
    yield* this.#handOutWindow(body.byteLength);
    await this.#whenHashed(t, job.then((digest) => ({ digest })), () => finish(t, body));
  }

  /**
   * In a page: the body read into a buffer with room for the record's prefix before it (the body
   * 64-byte aligned), so that the record's bytes lie together for one WebCrypto call, which
   * copies them and hashes off this thread while this thread reads the next tensor; a body that
   * is a view into the input lies there after its prefix when the input came in whole records (a
   * Blob read by its index: `readPieces`), and is hashed there; a body in the caller's buffer, or
   * one whose prefix came in another chunk, is joined to its prefix first. Handed out as on the
   * native thread.
   */
  async *#webRawBody(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const prefix = concatBytes(prefixParts(t)); // before the read reuses them
    const room = prefix.byteLength + padTo(prefix.byteLength);
    const ours = { buffer: undefined as ArrayBuffer | undefined };
    const body = await this.#r.readBody(
      t.rh.bodyBytes,
      t.subject,
      undefined,
      t.rawInto ?? ((n) => new Uint8Array(ours.buffer = new ArrayBuffer(room + n), room, n)),
    );
    let bytes: Uint8Array;
    if (ours.buffer && body.buffer === ours.buffer) {
      bytes = new Uint8Array(ours.buffer, room - prefix.byteLength, prefix.byteLength + body.byteLength);
      bytes.set(prefix);
    } else bytes = together([t.recordHeader, t.head, t.pad, body]) ?? concatBytes([prefix, body]);
    // Hashed ahead by the reader (a Blob's pieces, on a worker), or now.
    const known = takeDigest(bytes);
    const job = known ? Promise.resolve(known) : webDigest(bytes)!;
    job.catch(() => {});
    yield* this.#handOutWindow(body.byteLength);
    await this.#whenHashed(t, job.then((digest) => ({ digest })), () => finish(t, body));
  }

  /**
   * Hands out the oldest tensors being hashed off this thread until, with one more of `bytes`,
   * at most NATIVE_WINDOW are, and NATIVE_WINDOW_BYTES at most (unless one alone is larger).
   */
  #handOutWindow(bytes: number): AsyncGenerator<CheckpointRecord> {
    const out = this.#out;
    return out.handOutWhile(() =>
      out.pendingCount() >= NATIVE_WINDOW || out.pendingBytes() + bytes > NATIVE_WINDOW_BYTES
    );
  }

  /** Read here; hashed here, or on the hash thread once that is up (`parallelHash: true`). */
  async *#raw(t: TensorAt): AsyncGenerator<CheckpointRecord> {
    const n = t.rh.bodyBytes;
    const large = n >= OFF_THREAD_MIN && (!this.#reuse || n <= OFF_THREAD_MAX);
    if (large && this.#parallel === true && !this.#threadStarted && hashThreadDue(this.#largeBytes)) {
      this.#threadStarted = true;
      this.#thread = startHashThread();
    }
    if (large) this.#largeBytes += n;
    // (Not for a body that goes into the caller's buffer: the thread hashes a buffer of its own.)
    const side = large && !this.#out.held() && !t.target && this.#thread?.ready ? this.#thread : undefined;
    if (side) return yield* this.#rawOnHashThread(t, side);
    const body = await this.#r.readBody(n, t.subject, t.h, t.rawInto);
    await this.#checkTensor(t);
    yield* this.#out.handOut(finish(t, body), t.d.byteLength);
  }

  /**
   * On the hash thread: the record's bytes must lie in one buffer of their own, so the body is
   * read into one with room for the record's prefix before it, the body 64-byte aligned; the
   * buffer goes to the thread and comes back with the digest.
   */
  async *#rawOnHashThread(t: TensorAt, side: HashThread): AsyncGenerator<CheckpointRecord> {
    const prefixBytes = RECORD_HEADER_BYTES + t.head.byteLength + t.pad.byteLength;
    const room = prefixBytes + padTo(prefixBytes);
    const into = { buffer: undefined as ArrayBuffer | undefined };
    const body = await this.#r.readBody(t.rh.bodyBytes, t.subject, undefined, (n) => {
      into.buffer = this.#sideScratch(room + n);
      return new Uint8Array(into.buffer, room, n);
    });
    const mine = into.buffer;
    if (!mine || body.buffer !== mine || !side.ready) {
      // The body lies whole in one chunk of the input (a view into it), or the thread ended
      // while it was read (idle for 2 s while a slow read filled fresh memory): hashed here.
      t.h.update(body);
      await this.#checkTensor(t);
      const record = finish(t, body);
      yield* this.#out.settle();
      yield record;
      return;
    }
    const n = body.byteLength;
    let o = room - prefixBytes;
    for (const part of prefixParts(t)) {
      new Uint8Array(mine).set(part, o);
      o += part.byteLength;
    }
    const job = side.digest(mine, room - prefixBytes, prefixBytes + n).then((done) => {
      if (this.#reuse) this.#sideBuffer = done.buffer;
      return done;
    });
    await this.#whenHashed(t, job, ({ buffer }) => finish(t, new Uint8Array(buffer, room, n)));
  }

  /** A buffer for a body the hash thread takes: fresh, or with reuseBuffers one shared from tensor to tensor. */
  #sideScratch(n: number): ArrayBuffer {
    if (!this.#reuse) return new ArrayBuffer(n);
    if (!this.#sideBuffer || this.#sideBuffer.byteLength < n) {
      // Grown like the reader's own buffer (doubling), but never past what one body needs.
      this.#sideBuffer = new ArrayBuffer(
        Math.max(n, Math.min(2 * (this.#sideBuffer?.byteLength ?? 0), OFF_THREAD_MAX)),
      );
    }
    return this.#sideBuffer;
  }
}

/**
 * Decodes a binary stream record by record. `input` is a chunk sequence or an open file (then
 * bodies are read straight into their final buffers, the next piece read while one is hashed,
 * and `tap`, if given, sees every byte of the file).
 *
 * With `parallelHash`, where the runtime has a second thread for SHA-256 ({@linkcode startHashThread}), the thread is started once 32 MiB of tensors of 1 MiB or more
 * have been read, and is up after 50-150 ms; from then on such tensors alternate between the threads: one is
 * read whole and sent to the other thread (its buffer transferred there and back, no copy) while
 * this thread reads and hashes the next; the first is handed out once its digest matched, then
 * the second. At most one tensor is on the other thread at a time, so with `reuseBuffers` two
 * buffers suffice (one per thread; the other thread's takes tensors up to 64 MiB), and a tensor
 * stays valid until the next record is requested, as on one thread.
 *
 * Without `reuseBuffers` and unless `parallelHash` is `false`, where there is a native hash
 * thread ({@linkcode nativeDigest}: FFI granted), each tensor of 1 MiB or more (decoded, or raw
 * from a file) is hashed there while this thread reads or decodes the next; that takes the place
 * of the other second threads, and the order and the rule that a tensor comes out only once its
 * digest matched are the same. A byte-grouped tensor is hashed there a part (1 MiB) at a time
 * while this thread decodes the next part. Raw tensors read from a file are hashed there up to
 * one per core at once (two to four: {@linkcode NATIVE_WINDOW}; 64 MiB of them at most, unless
 * one alone is larger), each on a thread of its own, while this thread reads the next, so a
 * reader holds that many tensors before they come out.
 *
 * A load (without `reuseBuffers`, and with no range hasher taking every other body) reads each
 * byte-grouped body of 1 MiB or more into one of two reused buffers while the one before it is
 * decoded and hashed: the read runs on the runtime's I/O thread. Small tensors between two such
 * bodies (a model's biases and norms: up to 4 MiB of them, each under 1 MiB) are read, verified
 * and held back meanwhile, so that the next large body is read while the one before is decoded.
 * Such a tensor is handed out later than it would be otherwise, still in order; an error in it is
 * reported before any in the records read after it.
 */
export async function* decodeRecords(
  input: AsyncIterable<Uint8Array> | ByteReader,
  limits?: DecodeRecordsOptions,
  tap?: Hash,
  digest?: Settle<string>,
  bodies: "keep" | "hash" = "keep",
): AsyncGenerator<CheckpointRecord> {
  yield* new BinaryDecoder(input, limits, tap, digest, bodies).records();
}
