// The binary decoder's hand-out queue: tensors verified on another thread (or waiting to be
// decoded) come out in the order they were read, each once its digest matched, with the small
// tensors verified meanwhile held behind them. The decoder (_binary_decoder.ts) reads; this
// keeps the order.
import type { CheckpointRecord } from "../types.ts";
import { equalBytes, nativeDigest, sha256, toHex, webDigest } from "../_hash.ts";
import { concatBytes } from "../dtype.ts";
import type { ChunkReader } from "../_chunk_reader.ts";
import { ChecksumMismatchError } from "../errors.ts";
import type { PlaneScratch } from "./_bytegroup.ts";
import { decodeTensorBody, decodeTensorBodyParts, padTo, type TensorDescriptor } from "./_binary_layout.ts";

/** Tensor bodies from this size on are never held back behind another (see {@linkcode FOLLOWERS_MAX_BYTES}). */
const HOLD_MAX = 2 ** 20;
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

/** What names a tensor in messages and makes its record. */
export interface Tensorish {
  d: TensorDescriptor;
  /** `tensor "name"`, for messages. */
  subject: string;
  /** Offsets of the record and of its body. */
  at: number;
  bodyAt: number;
}

/** A byte-grouped tensor read and waiting to be decoded (see {@linkcode HandOut.defer}). */
export interface Deferred {
  t: Tensorish;
  /** Its stored body, in a buffer of the decoder's `planes` scratch. */
  stored: Uint8Array;
  /** The record's bytes before the body (the record digest covers them). */
  prefix: Uint8Array;
  /** The stored record digest. */
  digest: Uint8Array;
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
 * A tensor being hashed off the main thread: its record once the digest matched, or the error
 * that names it; the small tensors verified after it, handed out right after it; and its own
 * bytes, which the reader holds until it comes out.
 */
interface Pending {
  record: Promise<CheckpointRecord>;
  after: CheckpointRecord[];
  afterBytes: number;
  bytes: number;
}

/** `first`, then every part of `rest`; then `done`, if given, is called (also if it failed or was left). */
export async function* prepend(
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

/** The tensors a decoder holds back, handed out in order. */
export class HandOut {
  readonly #r: ChunkReader;
  readonly #planes: PlaneScratch;
  /** Whether the load hashes large tensors on the native thread (decided with the file header). */
  nativeLoad = false;
  /** Whether small tensors may be held back behind the tensors being hashed off this thread (a load that hashes there). */
  holdFollowers = false;
  /** Whether a page's load hashes large tensors by WebCrypto (decided with the file header). */
  webLoad = false;
  /** Oldest first; more than one only on the native thread. */
  readonly #pending: Pending[] = [];
  /** A byte-grouped tensor read but not decoded yet: decoded while the next body is read, or before anything after it is handed out. */
  #deferred: Deferred | undefined;
  /**
   * A byte-grouped tensor being decoded a part at a time as the native thread hashes the parts:
   * settles once its last part is made (or its hash failed). It reads its stored body and the
   * plane scratch meanwhile, so another decode, or a read into its body's buffer, waits for it.
   */
  #decoding: Promise<unknown> | undefined;
  /** The jobs on the native thread, settled together: their buffers must outlive them (see {@linkcode close}). */
  #native: Promise<unknown> | undefined;

  constructor(r: ChunkReader, planes: PlaneScratch) {
    this.#r = r;
    this.#planes = planes;
  }

  /** What a decode of the plane scratch, or a read into a deferred body's buffer, waits for. */
  get decoding(): Promise<unknown> | undefined {
    return this.#decoding;
  }

  /** Whether a tensor is held back (hashing, or waiting to be decoded): the next may go to another thread only once none is. */
  held(): boolean {
    return this.#pending.length > 0 || this.#deferred !== undefined;
  }

  /** How many tensors are being hashed off this thread. */
  pendingCount(): number {
    return this.#pending.length;
  }

  /** Their bytes. */
  pendingBytes(): number {
    let bytes = 0;
    for (const p of this.#pending) bytes += p.bytes;
    return bytes;
  }

  /** Queues a tensor's record, to come out once `record` settles, after every tensor before it. */
  push(record: Promise<CheckpointRecord>, bytes: number): void {
    this.#pending.push({ record, after: [], afterBytes: 0, bytes });
  }

  /** Holds `deferred` until the next body's read is under way ({@linkcode advance}) or the end. */
  defer(deferred: Deferred): void {
    this.#deferred = deferred;
  }

  /** Adds a job on the native thread to those awaited before the reader ends, however it ends. */
  track<T>(job: Promise<T>): Promise<T> {
    this.#native = this.#native ? Promise.allSettled([this.#native, job]) : job;
    return job;
  }

  /** Waits for every job on the native thread (their buffers must outlive them). */
  async close(): Promise<void> {
    await this.#native?.catch(() => {});
  }

  /**
   * A tensor's record once `job`'s digest matched `stored`; a malformed body fails with the
   * decoder's own error, as on this thread; any other failure names the tensor.
   */
  matched<T extends { digest: Uint8Array }>(
    job: Promise<T>,
    stored: Uint8Array,
    t: Pick<Tensorish, "subject" | "at">,
    record: (done: T) => CheckpointRecord,
  ): Promise<CheckpointRecord> {
    const { subject, at } = t;
    const p = job.then(
      (done) => {
        if (!equalBytes(done.digest, stored)) {
          throw new ChecksumMismatchError(subject, toHex(stored), toHex(done.digest), `at offset ${at}`);
        }
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
  }

  /** Hands out every tensor still held back, in order. */
  settle(): AsyncGenerator<CheckpointRecord> {
    return this.handOutWhile(() => true);
  }

  /** Hands out the tensors held back, in order, for as long as `more()` says. */
  async *handOutWhile(more: () => boolean): AsyncGenerator<CheckpointRecord> {
    yield* this.advance();
    while (this.#pending.length > 0 && more()) {
      const { record, after } = this.#pending.shift()!;
      let out: CheckpointRecord;
      try {
        out = await record;
      } catch (e) {
        this.#pending.length = 0; // nothing after a tensor that failed comes out
        throw e;
      }
      yield out;
      for (const follower of after) yield follower;
    }
  }

  /** `record`, a tensor verified on this thread: held back behind a tensor still held where there is room, else handed out after them all. */
  async *handOut(record: CheckpointRecord, bytes: number): AsyncGenerator<CheckpointRecord> {
    if (this.#holdBack(record, bytes)) return;
    yield* this.settle();
    yield record;
  }

  /**
   * Hands out the tensors before the deferred one (and the small ones held back behind it), once
   * the deferred one is on its way.
   */
  async *advance(): AsyncGenerator<CheckpointRecord> {
    if (!this.#deferred) return;
    const { after, afterBytes, t } = this.#deferred;
    const next = await this.#sendDeferred();
    yield* this.settle();
    this.#pending.push({ record: next.record, after, afterBytes, bytes: t.d.byteLength });
  }

  /**
   * Holds `record`, a small tensor verified and in a buffer of its own, back behind the deferred
   * tensor, or in a load that hashes off this thread behind the last tensor being hashed
   * there, when there is one and room (FOLLOWERS_MAX_BYTES, FOLLOWERS_MAX: behind the deferred
   * one, or behind all those being hashed): the next large body can then be read while that one
   * is decoded or hashed. False where it must be handed out now, after everything held.
   */
  #holdBack(record: CheckpointRecord, bytes: number): boolean {
    const group = this.#deferred ? [this.#deferred] : this.holdFollowers ? this.#pending : [];
    const t = group.at(-1);
    if (!t || bytes >= HOLD_MAX) return false;
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
  }

  /**
   * Decodes the deferred tensor and hashes it: its record once the digest matched (wrapped, as
   * awaiting the outer promise must not wait for the hash). With a native thread, a part at a
   * time, each part hashed there while this thread makes the next, in the background (a malformed
   * plane is then the job's error): this thread meanwhile waits for the next body's read, or reads
   * small tensors. In a page, decoded at once and hashed by WebCrypto, off this thread. Otherwise decoded at once (a malformed body throws the decoder's own error
   * now) and hashed here.
   */
  async #sendDeferred(): Promise<{ record: Promise<CheckpointRecord> }> {
    const { t, stored, prefix, digest, finish } = this.#deferred!;
    this.#deferred = undefined;
    const allocate = (n: number) => this.#r.allocate(n);
    if (this.nativeLoad) {
      await this.#decoding;
      const { data, parts } = decodeTensorBodyParts(t.d, stored, t.bodyAt, allocate, this.#planes);
      let made!: () => void;
      const whole = new Promise<void>((resolve) => made = resolve);
      const job = this.track(nativeDigest(prepend(prefix, parts, made))!);
      this.#decoding = Promise.race([whole, job.catch(() => {})]);
      return { record: this.matched(job.then((digest) => ({ digest })), digest, t, () => finish(data)) };
    }
    if (this.webLoad) {
      // Decoded into a buffer with room for the record's prefix before it, so that the bytes the
      // record digest covers lie together for one WebCrypto call, off this thread.
      const room = prefix.byteLength + padTo(prefix.byteLength);
      const ours = { buffer: undefined as ArrayBuffer | undefined };
      const into = (n: number) => new Uint8Array(ours.buffer = new ArrayBuffer(room + n), room, n);
      const body = await decodeTensorBody(t.d, stored, t.bodyAt, into, this.#planes);
      const at = room - prefix.byteLength;
      const bytes = body.buffer === ours.buffer
        ? new Uint8Array(ours.buffer, at, prefix.byteLength + body.byteLength)
        : concatBytes([prefix, body]);
      if (bytes.buffer === ours.buffer) bytes.set(prefix);
      const job = webDigest(bytes)!.then((digest) => ({ digest }));
      return { record: this.matched(job, digest, t, () => finish(body)) };
    }
    const body = await decodeTensorBody(t.d, stored, t.bodyAt, allocate, this.#planes);
    const job = Promise.resolve(sha256().update(prefix).update(body).digest());
    return { record: this.matched(job.then((digest) => ({ digest })), digest, t, () => finish(body)) };
  }
}
