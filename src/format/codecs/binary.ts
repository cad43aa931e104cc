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
import { bytesOf, concatBytes, DTYPES, typedArrayFrom } from "../dtype.ts";
import { ChecksumMismatchError } from "../errors.ts";
import { type DecodeLimits, resolveLimits } from "../limits.ts";
import { metadataFromJson, metadataToJson } from "../metadata.ts";
import type { Checkpoint, CheckpointRecord } from "../types.ts";
import { readTensorsByName } from "./binary_file.ts";
import { type ByteReader, type EncodedBody, isByteReader, type RangeHasher } from "../_byte_reader.ts";
import { ChunkReader } from "../_chunk_reader.ts";
import { type IntoBuffers, intoBytes } from "../_read_into.ts";
import {
  equalBytes,
  type Hash,
  type HashThread,
  hashThreadDue,
  hasNativeDigest,
  nativeDigest,
  sha256,
  startHashThread,
  toHex,
} from "../_hash.ts";
import { digestingDecoder, digestingEncoder, type EncoderDigests, type Settle } from "../_pair.ts";
import { EncodeGuard } from "../_encode_guard.ts";
import { BYTEGROUP_ENCODING, planByteGroups, PlaneScratch } from "./_bytegroup.ts";
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
  decodeTensorBodyParts,
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
  type TensorDescriptor,
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
  const scratch = byteGroup ? PlaneScratch.acquire() : undefined;
  // A byte-grouped tensor's record digest, computed on the native thread from a copy of its bytes
  // while this thread codes it and the next tensor: written (with its index entry) before anything
  // after it.
  let held: { job: Promise<Uint8Array>; entry: () => IndexEntry } | undefined;
  // The last job started (the next one's, while the held one is written).
  let latest: Promise<Uint8Array> | undefined;
  let copyTurn = 0;
  const native = scratch !== undefined && hasNativeDigest();
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
      yield* release();
      if (position !== start) throw new Error(`binary encoder: record at ${position}, its prefix says ${start}`);
      if (job) {
        held = { job, entry };
        yield emit(prefix);
        for (const part of parts!) yield emit(part, undefined, true);
        continue;
      }
      const h = sha256();
      yield emit(prefix, h);
      if (parts) {
        // The record digest covers the tensor's own bytes, so a reader checks what it decoded.
        h.update(body);
        for (const part of parts) yield emit(part, undefined, true);
      } else {
        for (let i = 0; i < body.byteLength; i += BODY_SLICE) {
          yield emit(body.subarray(i, Math.min(body.byteLength, i + BODY_SLICE)), h, true);
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

/** Tensor bodies from this size on may be hashed on the second thread (smaller ones are hashed faster than handed over). */
const OFF_THREAD_MIN = 2 ** 20;
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
/** The encoder's {@linkcode PlaneScratch} buffers (after every plane's and deflate output's) for copies hashed on the native thread. */
const COPY_SCRATCH = 16;
/**
 * Larger tensors are hashed on this thread: two copies of this size at most (one being hashed,
 * one being made) is all the memory the native thread adds to a save.
 */
const COPY_MAX = 16 * 2 ** 20;
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

/** `first`, then every part of `rest`; then `done`, if given, is called (also if it failed or was left). */
async function* prepend(
  first: Uint8Array,
  rest: AsyncIterable<Uint8Array>,
  done?: () => void,
): AsyncGenerator<Uint8Array> {
  try {
    yield first;
    yield* rest;
  } finally {
    done?.();
  }
}

/** A byte-grouped tensor read and waiting to be decoded (see `deferred` in {@linkcode decodeRecords}). */
interface Deferred {
  descriptor: TensorDescriptor;
  /** Its stored body, in a buffer of the decoder's `planes` scratch. */
  stored: Uint8Array;
  /** The record's bytes before the body (the record digest covers them). */
  prefix: Uint8Array;
  /** The stored record digest. */
  digest: Uint8Array;
  subject: string;
  /** Offsets of the record and of its body. */
  at: number;
  bodyAt: number;
  /** Its record, given the decoded bytes. */
  finish: (body: Uint8Array) => CheckpointRecord;
  /**
   * Small tensors read after it and verified, each in a buffer of its own, to be handed out right
   * after it (see {@linkcode FOLLOWERS_MAX_BYTES}).
   */
  after: CheckpointRecord[];
  /** Their bytes. */
  afterBytes: number;
}

/**
 * Tensor bytes a load reads, verifies and holds back after a deferred byte-grouped tensor, so
 * that the next large body is read while that one is decoded: a model's small tensors (biases,
 * norms) sit between its large ones. Past this, or at a tensor of 1 MiB or more that is not
 * byte-grouped, the deferred one is decoded first. Eight 4 MiB kernels, each followed by a 4 KiB
 * bias, loaded 1.12-1.29x faster so (FFI granted, 2-core VM; an A/A run 1.03x), the train demo's
 * Adam state 1.02-1.11x (A/A 1.06x): the read of each kernel after the first no longer waits for
 * the one before.
 */
const FOLLOWERS_MAX_BYTES = 4 * 2 ** 20;
/** Tensors held back so, at most (their records are small, but not free). */
const FOLLOWERS_MAX = 4096;

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
  limits?: DecoderOptions & { into?: IntoBuffers },
  tap?: Hash,
  digest?: Settle<string>,
  bodies: "keep" | "hash" = "keep",
): AsyncGenerator<CheckpointRecord> {
  const lim = resolveLimits(limits);
  const reuse = limits?.reuseBuffers ?? false;
  const parallel = limits?.parallelHash;
  // Started once enough large bodies came to make it worth its start; takes tensors once it is up.
  let thread: HashThread | undefined;
  let threadStarted = false;
  let largeBytes = 0;
  const r = new ChunkReader(input, "checkpoint", reuse, tap);
  // A large file: a second thread reads and hashes (and decodes) every other large body itself.
  let ranger: RangeHasher | undefined;
  const stream = sha256();
  const read = async (n: number, what: string, record?: Hash): Promise<Uint8Array> => {
    const b = await r.readExact(n, what);
    stream.update(b);
    record?.update(b);
    return b;
  };
  const mismatch = (subject: string, stored: Uint8Array, actual: Uint8Array, at: number) =>
    new ChecksumMismatchError(subject, toHex(stored), toHex(actual), `at offset ${at}`);
  const checkDigest = async (h: Hash, subject: string, at: number): Promise<void> => {
    const stored = await read(DIGEST_BYTES, `the digest of ${subject}`);
    const actual = h.digest();
    if (!equalBytes(actual, stored)) throw mismatch(subject, stored, actual, at);
  };
  // With reuseBuffers, tensors hashed off the main thread share this buffer; the others the reader's own.
  let sideBuffer: ArrayBuffer | undefined;
  const sideScratch = (n: number): ArrayBuffer => {
    if (!reuse) return new ArrayBuffer(n);
    if (!sideBuffer || sideBuffer.byteLength < n) {
      // Grown like the reader's own buffer (doubling), but never past what one body needs.
      sideBuffer = new ArrayBuffer(Math.max(n, Math.min(2 * (sideBuffer?.byteLength ?? 0), OFF_THREAD_MAX)));
    }
    return sideBuffer;
  };
  // A verify decodes byte-grouped bodies into one buffer, reused from one tensor to the next, and
  // any decoder inflates their planes into buffers reused likewise.
  const decoded = PlaneScratch.acquire();
  const planes = PlaneScratch.acquire();
  // The tensors being hashed off the main thread, oldest first (more than one only on the native
  // thread, NATIVE_WINDOW at most): each one's record once the digest matched, or the error that
  // names it; the small tensors verified after it, handed out right after it; and its own bytes,
  // which this reader holds until it comes out.
  const pending: { record: Promise<CheckpointRecord>; after: CheckpointRecord[]; afterBytes: number; bytes: number }[] =
    [];
  // A byte-grouped tensor read but not decoded yet (a load, see `deferLoad`): it is decoded
  // while the next one's body is read, or before anything after it is handed out.
  let deferred: Deferred | undefined;
  // The read of such a body, in flight while the one before it is decoded: it fills a buffer of
  // `planes`, so it is awaited before this reader ends, however it ends.
  let reading: Promise<unknown> | undefined;
  let bodyTurn = 0;
  // A tensor's record once `job`'s digest matched `stored`; a malformed body fails with the
  // decoder's own error, as on this thread; any other failure names the tensor.
  const matched = <T extends { digest: Uint8Array }>(
    job: Promise<T>,
    stored: Uint8Array,
    subject: string,
    at: number,
    record: (done: T) => CheckpointRecord,
  ): Promise<CheckpointRecord> => {
    const p = job.then(
      (done) => {
        if (!equalBytes(done.digest, stored)) throw mismatch(subject, stored, done.digest, at);
        return record(done);
      },
      (e) => {
        if (e instanceof SyntaxError) throw e;
        throw new Error(`Cannot verify checkpoint: ${subject} at offset ${at}: ${(e as Error)?.message ?? e}`, {
          cause: e,
        });
      },
    );
    p.catch(() => {}); // awaited before anything after this tensor is handed out
    return p;
  };
  // Whether this load hashes large tensors on the native thread (decided with the header).
  let nativeLoad = false;
  // A byte-grouped tensor being decoded a part at a time as the native thread hashes the parts:
  // settles once its last part is made (or its hash failed). It reads its stored body and the
  // plane scratch meanwhile, so another decode, or a read into its body's buffer, waits for it.
  let decoding: Promise<unknown> | undefined;
  // Decodes the deferred tensor and hashes it: its record once the digest matched (wrapped, as
  // awaiting the outer promise must not wait for the hash). With a native thread, a part at a
  // time, each part hashed there while this thread makes the next, in the background (a malformed
  // plane is then the job's error): this thread meanwhile waits for the next body's read, or reads
  // small tensors. Otherwise decoded at once (a malformed body throws the decoder's own error
  // now) and hashed here.
  const sendDeferred = async (): Promise<{ record: Promise<CheckpointRecord> }> => {
    const t = deferred!;
    deferred = undefined;
    if (nativeLoad) {
      await decoding;
      const { data, parts } = decodeTensorBodyParts(t.descriptor, t.stored, t.bodyAt, (n) => r.allocate(n), planes);
      let made!: () => void;
      const whole = new Promise<void>((resolve) => made = resolve);
      const job = track(nativeDigest(prepend(t.prefix, parts, made))!);
      decoding = Promise.race([whole, job.catch(() => {})]);
      return { record: matched(job.then((digest) => ({ digest })), t.digest, t.subject, t.at, () => t.finish(data)) };
    }
    const body = await decodeTensorBody(t.descriptor, t.stored, t.bodyAt, (n) => r.allocate(n), planes);
    const job = Promise.resolve(sha256().update(t.prefix).update(body).digest());
    return { record: matched(job.then((digest) => ({ digest })), t.digest, t.subject, t.at, () => t.finish(body)) };
  };
  // Whether a tensor is held back (hashing, or waiting to be decoded): the next one may go to
  // another thread only once none is, so that they come out in order.
  const held = () => pending.length > 0 || deferred !== undefined;
  // Hands out the tensor before the deferred one (and the small ones held back behind it), once
  // the deferred one is on its way.
  async function* advance(): AsyncGenerator<CheckpointRecord> {
    if (!deferred) return;
    const { after, afterBytes, descriptor } = deferred;
    const next = await sendDeferred();
    yield* settle();
    pending.push({ record: next.record, after, afterBytes, bytes: descriptor.byteLength });
  }
  // Hands out every tensor still held back, in order.
  const settle = () => handOutWhile(() => true);
  // Hands out the tensors held back, in order, for as long as `more()` says.
  async function* handOutWhile(more: () => boolean): AsyncGenerator<CheckpointRecord> {
    yield* advance();
    while (pending.length > 0 && more()) {
      const { record, after } = pending.shift()!;
      let out: CheckpointRecord;
      try {
        out = await record;
      } catch (e) {
        pending.length = 0; // nothing after a tensor that failed comes out
        throw e;
      }
      yield out;
      for (const follower of after) yield follower;
    }
  }
  // Holds `record`, a small tensor verified and in a buffer of its own, back behind the deferred
  // tensor, or in a load that hashes on the native thread behind the last tensor being hashed
  // there, when there is one and room (FOLLOWERS_MAX_BYTES, FOLLOWERS_MAX: behind the deferred
  // one, or behind all those being hashed): the next large body can then be read while that one
  // is decoded or hashed. False where it must be handed out now, after everything held.
  const holdBack = (record: CheckpointRecord, bytes: number): boolean => {
    const group = deferred ? [deferred] : nativeLoad ? pending : [];
    const t = group.at(-1);
    if (!t || bytes >= OFF_THREAD_MIN) return false;
    let heldBytes = 0;
    let heldCount = 0;
    for (const g of group) {
      heldBytes += g.afterBytes;
      heldCount += g.after.length;
    }
    if (heldBytes + bytes > FOLLOWERS_MAX_BYTES || heldCount >= FOLLOWERS_MAX) return false;
    t.after.push(record);
    t.afterBytes += bytes;
    return true;
  };
  // The jobs on the native thread, settled together: their buffers must outlive them, so they are
  // awaited before this reader ends, however it ends (`track` adds one).
  let native: Promise<unknown> | undefined;
  const track = <T>(job: Promise<T>): Promise<T> => {
    native = native ? Promise.allSettled([native, job]) : job;
    return job;
  };
  try {
    const flags = decodeHeader(await read(HEADER_BYTES, "the header"));
    // By default for a verify, and for a load of a byte-grouped file (decoding is work two threads
    // share); a load of raw bodies only with parallelHash: true, as it measured slower as often as
    // faster (README, "Performance"). With reuseBuffers a body's buffer is overwritten by the
    // next: it could not wait for the other thread.
    const grouped = (flags & FLAG_BYTEGROUP) !== 0;
    const ranges = bodies === "hash"
      ? parallel !== false
      : !reuse && (parallel === true || (parallel === undefined && grouped));
    // A load into fresh buffers hashes each large tensor on the native thread where there is one
    // (nothing to start), while this thread reads or decodes the next; then it starts no range
    // hasher (a 256 MiB byte-grouped load took 383-445 ms so against 480-630 with one), and it
    // takes none with one thread asked for.
    nativeLoad = bodies === "keep" && !reuse && parallel !== false && !rangeForced && hasNativeDigest();
    if (ranges && !nativeLoad && !tap && isByteReader(input) && input.rangeHasher) {
      if ((await input.stat()).size >= rangeFileMin) ranger = await input.rangeHasher();
      if (ranger && rangeWaitReady) await ranger.up;
    }
    // A load into fresh buffers reads each byte-grouped body while the one before it is decoded
    // (and hashed, here or on the native thread), unless the range hasher takes every other one.
    const deferLoad = bodies === "keep" && !reuse && (nativeLoad || (!ranger && !rangeForced));
    // Its buffers must be ours: decoded bodies always are, raw ones when read from a file (from
    // a chunk sequence a body may be a view into the caller's chunk).
    const nativeRaw = nativeLoad && isByteReader(input);
    const seen: IndexEntry[] = [];
    const names = new Set<string>();
    let sawMetadata = false;
    for (;;) {
      const at = r.position;
      const h = sha256();
      const recordHeader = await read(RECORD_HEADER_BYTES, "a record header", h);
      const rh = decodeRecordHeader(recordHeader, at, lim);
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
        yield* settle();
        const entries = checkIndex(parseJson(head, "index", headAt), `at offset ${headAt}`, lim);
        await checkDigest(h, "index", at);
        if (JSON.stringify(entries) !== JSON.stringify(seen)) {
          fail("index does not match the tensors in the stream", at);
        }
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
        throw new RangeError(
          `Cannot decode checkpoint: more than maxTensors ${lim.maxTensors} tensors at offset ${at}`,
        );
      }
      const d = checkDescriptor(parseJson(head, "tensor descriptor", headAt), `at offset ${headAt}`, lim, true);
      if (names.has(d.name)) fail(`duplicate tensor name ${JSON.stringify(d.name)}`, headAt);
      names.add(d.name);
      checkBodyLength(d, rh.bodyBytes, flags, at);
      const padAt = r.position;
      const pad = await read(padTo(padAt), "padding", h);
      if (pad.some((b) => b !== 0)) fail(`non-zero padding before tensor ${JSON.stringify(d.name)}`, padAt);
      const bodyAt = r.position;
      const subject = `tensor ${JSON.stringify(d.name)}`;
      const { name, dtype, shape, group } = d;
      // The caller's buffer for this tensor (`loadCheckpoint`'s `into`): a raw body read from a
      // file goes straight into it; anything else is copied there by the load once verified.
      const target = bodies === "keep" ? intoBytes(limits?.into, name, d.byteLength) : undefined;
      const rawInto = target && !d.encoding ? () => target : undefined;
      const finish = (body: Uint8Array): CheckpointRecord => {
        const data = typedArrayFrom(dtype, body);
        if (dtype === "bool") checkBools(data as Uint8Array, name, `at offset ${bodyAt}`);
        return { type: "tensor", tensor: { name, dtype, shape, group, data } };
      };
      // What a tensor verified but not kept is handed out as: its data an empty array.
      const hollow = (): CheckpointRecord => ({
        type: "tensor",
        tensor: { name, dtype, shape, group, data: typedArrayFrom(dtype, NO_BYTES) },
      });
      // A tensor hashed (and perhaps decoded) on another thread by `job`: its stored digest is read
      // now, and `record` is handed out once the job's digest matched it, before anything after
      // it. A malformed body fails with the decoder's own error, as on this thread; any other
      // failure names the tensor.
      const whenHashed = async <T extends { digest: Uint8Array }>(
        job: Promise<T>,
        record: (done: T) => CheckpointRecord,
      ): Promise<void> => {
        job.catch(() => {});
        const stored = await storedDigest();
        pending.push({
          record: matched(job, stored, subject, at, record),
          after: [],
          afterBytes: 0,
          bytes: d.byteLength,
        });
      };
      // The tensor's stored digest, read now (a copy: the reader may reuse its bytes).
      const storedDigest = async (): Promise<Uint8Array> => {
        const stored = (await read(DIGEST_BYTES, `the digest of ${subject}`)).slice();
        seen.push(indexEntry(d, at, r.position - at));
        return stored;
      };
      // The range thread hashes this record's prefix and its body (which this thread has moved
      // past, or read into its buffer); `record` is handed out once that digest matched, before
      // anything after it.
      // A byte-grouped body is decoded there too (`keep`: its bytes come back to be handed out).
      const onOtherThread = async (
        side: RangeHasher,
        prefix: Uint8Array[],
        record: (data?: Uint8Array) => CheckpointRecord,
        decode?: EncodedBody,
      ) => {
        const job = decode && side.decode
          ? side.decode(concatBytes(prefix), bodyAt, rh.bodyBytes, decode)
          : side.digest(concatBytes(prefix), bodyAt, rh.bodyBytes).then((digest) => ({ digest, data: undefined }));
        await whenHashed(job, ({ data }) => record(data));
      };
      // The body goes into the record digest only; the stream digest covers that digest instead.
      // A byte-grouped body is decoded first: the record digest covers the tensor's own bytes.
      if (
        bodies === "hash" && ranger?.ready && !held() && !d.encoding && dtype !== "bool" &&
        rh.bodyBytes >= RANGE_BODY_MIN && await r.skipBody(rh.bodyBytes, subject)
      ) {
        // Verified on the other thread, which reads the body from the file itself.
        await onOtherThread(ranger, [recordHeader, head, pad], hollow);
        continue;
      }
      if (bodies === "hash" && !d.encoding) {
        // Verified, not kept: hashed piece by piece through two small reused buffers.
        const where = `at offset ${bodyAt}`;
        const bools = dtype === "bool" ? (p: Uint8Array, o: number) => checkBools(p, name, where, o) : undefined;
        await r.hashBody(rh.bodyBytes, subject, h, bools);
        await checkDigest(h, subject, at);
        seen.push(indexEntry(d, at, r.position - at));
        yield* settle();
        yield hollow();
        continue;
      }
      if (
        d.encoding && ranger?.ready && ranger.decode && !held() && (bodies === "hash" || !reuse) &&
        rh.bodyBytes >= RANGE_BODY_MIN && await r.skipBody(rh.bodyBytes, subject)
      ) {
        // Read, decoded and hashed on the other thread; a load gets the decoded bytes back.
        const keep = bodies === "keep";
        const count = d.byteLength / DTYPES[dtype].bytes;
        const record = (data?: Uint8Array) => keep ? finish(data!) : hollow();
        await onOtherThread(ranger, [recordHeader, head, pad], record, { name, dtype, count, keep });
        continue;
      }
      // On the native thread: the record's prefix (copied now: the reader may reuse its bytes) and
      // its tensor bytes, hashed while this thread goes on to the next tensor, beside the jobs of
      // up to NATIVE_WINDOW - 1 tensors before it and NATIVE_WINDOW_BYTES in all (older ones are
      // handed out first); this one comes out once its digest matched, before anything after it.
      const nativeHash = async function* (prefix: Uint8Array, body: Uint8Array): AsyncGenerator<CheckpointRecord> {
        const job = nativeDigest([prefix, body])!;
        track(job).catch(() => {});
        yield* handOutWhile(() => {
          let bytes = body.byteLength;
          for (const p of pending) bytes += p.bytes;
          return pending.length >= NATIVE_WINDOW || bytes > NATIVE_WINDOW_BYTES;
        });
        await whenHashed(job.then((digest) => ({ digest })), () => finish(body));
      };
      if (deferLoad && d.encoding && d.byteLength >= OFF_THREAD_MIN) {
        // Read into one of two buffers while the tensor before it is decoded from the other (the
        // read runs on another thread), then deferred in turn.
        const prefix = concatBytes([recordHeader, head, pad]);
        const turn = bodyTurn ^= 1;
        await decoding; // the tensor before the one before this may still be decoded from that buffer
        const body = r.readBody(
          rh.bodyBytes,
          subject,
          undefined,
          (n, room) => planes.take(BODY_SCRATCH + turn, n + room),
        );
        reading = body;
        body.catch(() => {});
        yield* advance();
        const stored = await body;
        const digest = await storedDigest();
        deferred = { descriptor: d, stored, prefix, digest, subject, at, bodyAt, finish, after: [], afterBytes: 0 };
        continue;
      }
      if (d.encoding) {
        // Read into the reader's scratch buffer: the stored bytes are decoded at once, into a new
        // buffer for a load, into one reused from tensor to tensor for a verify.
        // (Not beside a range hasher, which takes the second core: 128 MiB verifies 0.79x so.)
        const partwise = bodies === "hash" && parallel !== false && !ranger && d.byteLength >= OFF_THREAD_MIN &&
          hasNativeDigest();
        const prefix = partwise ? concatBytes([recordHeader, head, pad]) : undefined; // before the read reuses them
        const stored = await r.readBody(rh.bodyBytes, subject, undefined, "scratch");
        const into = bodies === "hash" ? (n: number) => decoded.take(0, n) : (n: number) => r.allocate(n);
        if (prefix) {
          // A verify with a native thread: decoded a part at a time, each part hashed there while
          // this thread decodes the next.
          const { parts } = decodeTensorBodyParts(d, stored, bodyAt, into, planes);
          const job = nativeDigest(prepend(prefix, parts))!.then((digest) => ({ digest }));
          // The stored digest is read once the job is done: the read may reuse `stored`'s buffer.
          await job.catch(() => {});
          const record = await matched(job, await storedDigest(), subject, at, hollow);
          yield* settle();
          yield record;
          continue;
        }
        await decoding; // the plane scratch is a deferred tensor's until its decode is done
        const body = await decodeTensorBody(d, stored, bodyAt, into, planes);
        h.update(body);
        await checkDigest(h, subject, at);
        seen.push(indexEntry(d, at, r.position - at));
        const record = bodies === "hash" ? hollow() : finish(body); // byte-grouped: floats only, no bools to check
        if (holdBack(record, d.byteLength)) continue;
        yield* settle();
        yield record;
        continue;
      }
      if (ranger?.ready && !held() && !reuse && rh.bodyBytes >= RANGE_BODY_MIN) {
        // Read into its own buffer here while the other thread reads the same bytes from the
        // file and hashes them.
        const body = await r.readBody(rh.bodyBytes, subject, undefined, rawInto);
        await onOtherThread(ranger, [recordHeader, head, pad], () => finish(body));
        continue;
      }
      if (nativeRaw && rh.bodyBytes >= OFF_THREAD_MIN) {
        const prefix = concatBytes([recordHeader, head, pad]);
        yield* nativeHash(prefix, await r.readBody(rh.bodyBytes, subject, undefined, rawInto));
        continue;
      }
      const large = !d.encoding && rh.bodyBytes >= OFF_THREAD_MIN && (!reuse || rh.bodyBytes <= OFF_THREAD_MAX);
      if (large && parallel === true && !threadStarted && hashThreadDue(largeBytes)) {
        threadStarted = true;
        thread = startHashThread();
      }
      if (large) largeBytes += rh.bodyBytes;
      // (Not for a body that goes into the caller's buffer: the thread hashes a buffer of its own.)
      const side = large && !held() && !target && thread?.ready ? thread : undefined;
      if (!side) {
        const body = await r.readBody(rh.bodyBytes, subject, h, rawInto);
        await checkDigest(h, subject, at);
        seen.push(indexEntry(d, at, r.position - at));
        const record = finish(body);
        if (holdBack(record, d.byteLength)) continue;
        yield* settle();
        yield record;
        continue;
      }
      // On the other thread: the record's bytes must lie in one buffer of their own, so the body
      // is read into one with room for the record's prefix before it, the body 64-byte aligned.
      const prefix = [recordHeader, head, pad];
      const prefixBytes = RECORD_HEADER_BYTES + head.byteLength + pad.byteLength;
      const room = prefixBytes + padTo(prefixBytes);
      const into = { buffer: undefined as ArrayBuffer | undefined };
      const body = await r.readBody(rh.bodyBytes, subject, undefined, (n) => {
        into.buffer = sideScratch(room + n);
        return new Uint8Array(into.buffer, room, n);
      });
      const mine = into.buffer;
      if (!mine || body.buffer !== mine || !side.ready) {
        // The body lies whole in one chunk of the input (a view into it), or the thread ended
        // while it was read (idle for 2 s while a slow read filled fresh memory): hashed here.
        h.update(body);
        await checkDigest(h, subject, at);
        seen.push(indexEntry(d, at, r.position - at));
        const record = finish(body);
        yield* settle();
        yield record;
        continue;
      }
      const n = body.byteLength;
      let o = room - prefixBytes;
      for (const part of prefix) {
        new Uint8Array(mine).set(part, o);
        o += part.byteLength;
      }
      // The buffer goes to the thread and comes back with the digest.
      const job = side.digest(mine, room - prefixBytes, prefixBytes + n).then((done) => {
        if (reuse) sideBuffer = done.buffer;
        return done;
      });
      await whenHashed(job, ({ buffer }) => finish(new Uint8Array(buffer, room, n)));
    }
  } catch (e) {
    // What was read before the error comes out first, in order (tensors held back included); a
    // tensor still being verified, or decoded, comes first in the stream: its error, if any, is
    // the one to report. (An error from a tensor's own job already took that tensor, and any
    // deferred after it, out of `pending` and `deferred`: nothing after it comes out.)
    yield* settle();
    throw e;
  } finally {
    await reading?.catch(() => {});
    await native?.catch(() => {});
    thread?.close();
    ranger?.close();
    decoded.release();
    planes.release();
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
