/**
 * The codec interface: how checkpoint records become bytes and back. A codec is a pair of
 * streams plus a test that recognises its bytes; the core needs no change to take a new one.
 *
 * @module
 */
import type { DecodeLimits } from "./limits.ts";
import type { Checkpoint, CheckpointRecord } from "./types.ts";

/** How many leading bytes {@linkcode Codec.detect} is shown (fewer when the stream is shorter). */
export const DETECT_BYTES = 64;

/** What a decoder is given: the caps, and whether tensors may share one data buffer. */
export interface DecoderOptions extends DecodeLimits {
  /**
   * Tensors may share one data buffer, each valid only until the next record is requested
   * (for one-pass consumers). A codec may ignore it.
   *
   * @default {false}
   */
  reuseBuffers?: boolean;
  /**
   * Hash on two threads where the runtime allows (Deno).
   *
   * Where the process was granted FFI (`--allow-ffi`, or `-A`) and the system has OpenSSL 3's
   * libcrypto, a load that hands out fresh buffers (no `reuseBuffers`) hashes each tensor of
   * 1 MiB or more with libcrypto on Deno's blocking thread pool while this thread reads or
   * decodes the next one: byte-grouped tensors (their decoded bytes) from any source, raw ones
   * read from a local file (from a stream a raw tensor may be a view into the caller's chunk).
   * Every byte-grouped tensor of 1 MiB or more such a load decodes, and with that thread every one
   * a verify decodes (unless the Worker below is reading), is hashed there a part (1 MiB) at a
   * time while this thread decodes the next part. Such a load (and one without that thread,
   * unless the Worker below takes every other body) reads each byte-grouped body of 1 MiB or more
   * while the tensor before it is decoded, holding the small tensors between them (up to 4 MiB of
   * them) back until that one comes out.
   * There is no Worker to start, so this is the default at any size, and such a load starts no
   * range-reading Worker (below). The permission is queried, never prompted for. A tensor still
   * comes out only once its digest matched, in order.
   *
   * A verify (`verifyCheckpoint`) of a local ckpt binary file of 64 MiB or more uses a second
   * thread by default: a Worker opens the same file (checked to be the same file by device and
   * inode, else left unused) and reads and hashes every other tensor of 1 MiB or more itself
   * while this thread moves past it, decoding a byte-grouped one first. So does a load of such a
   * file when it is byte-grouped and there is no native thread (decoding is the work two threads
   * share; the decoded bytes come back from the Worker without a copy), unless `reuseBuffers`.
   * `false` keeps every read to one thread.
   *
   * `true` makes reads that hand tensors out use a second thread too: from a local binary file
   * without `reuseBuffers`, the same Worker hashes every other tensor while this thread reads it
   * into its buffer; elsewhere (a stream, or `reuseBuffers`), once a read has passed 32 MiB of
   * tensors of 1 MiB or more, a Worker is started (it blocks the calling thread 30–70 ms) and such
   * tensors alternate: one is read whole and handed to it (its buffer transferred there and back,
   * no copy) while this thread reads and hashes the next. With `reuseBuffers` the tensors then
   * share two buffers instead of one (the Worker's takes tensors up to 64 MiB), and a tensor's
   * buffer may be detached, rather than overwritten, once the next record is requested. Tensors
   * always come out in order, each only once its digest matched; a Worker is closed when the read
   * ends or is cancelled, and ends itself after 2 s without work if a reader is abandoned. Not on
   * by default for these reads of raw bodies: it measured slower as often as faster (README,
   * "Performance").
   * Browsers and Node always hash on one thread. A codec may ignore this option.
   */
  parallelHash?: boolean;
}

/**
 * Random access to the bytes of one object (a local file, an object read by byte ranges over
 * HTTP or S3), for {@linkcode Codec.readTensors}. Storage backends provide it; codecs never
 * touch files or the network themselves.
 */
export interface RandomAccessReader {
  /** The object's address, for error messages. */
  readonly url: string;
  /** The object's size in bytes. */
  readonly size: number;
  /** Exactly `length` bytes from `offset`; an object that ends sooner is an error. */
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** What an encoder is given. */
export interface EncoderOptions {
  /**
   * Whether to offer {@linkcode CheckpointEncoder.sha256}. A caller that hashes the output
   * elsewhere (on another thread, say) turns it off to save a pass over every byte.
   *
   * @default {true}
   */
  digest?: boolean;
  /**
   * Compression the codec applies itself: `"bytegroup"` asks the binary codec for byte-grouped
   * float tensor bodies (`docs/FORMAT.md`); `encodeCheckpoint` asks no other codec for it. Where
   * the process was granted FFI and has libcrypto, the byte-grouped encoder hashes each tensor of
   * 1-16 MiB on Deno's blocking thread pool, from a copy taken before the tensor is split (never
   * the caller's buffer), while it codes that tensor and the next one.
   *
   * @default {"none"}
   */
  compression?: "none" | "bytegroup";
  /**
   * Whether each chunk of the readable side may be overwritten once the next one is read: for a
   * consumer that copies every chunk before it reads the next (a file written through staging
   * buffers). The binary codec's byte-grouped encoder then splits every tensor into the same
   * reused buffers instead of fresh memory; a consumer that keeps chunks must leave this off.
   *
   * @default {false}
   */
  transientChunks?: boolean;
}

/** An encoder: records in, bytes out. */
export interface CheckpointEncoder extends ReadableWritablePair<Uint8Array, CheckpointRecord> {
  /**
   * SHA-256 (hex) of every byte the readable side produced, settled when it closes. A codec that
   * hashes its own output anyway offers it so callers need not hash the same bytes again.
   */
  readonly sha256?: Promise<string>;
  /**
   * The checkpoint's stream digest (hex), for codecs that store one in their bytes (ckpt's binary
   * footer, the JSON end line): settled when the readable side closes. A full, verified read
   * recomputes it ({@linkcode CheckpointDecoder.digest}), so it identifies the checkpoint as
   * surely as the SHA-256 of its bytes, without a second pass over them.
   */
  readonly digest?: Promise<string>;
}

/** A decoder: bytes in, records out. */
export interface CheckpointDecoder extends ReadableWritablePair<CheckpointRecord, Uint8Array> {
  /**
   * The stream digest the bytes store (hex), settled once the decoder has recomputed and checked
   * it at the end of an intact stream; rejected otherwise. Offered by codecs that have one.
   */
  readonly digest?: Promise<string>;
}

/**
 * A checkpoint codec. The encoder must reject records out of order (metadata first, once) and
 * invalid tensors; the decoder must verify what it hands out and fail on truncated input, so a
 * short stream never decodes as a smaller valid checkpoint.
 *
 * @example
 * ```ts
 * import { type Codec, saveCheckpoint, loadCheckpoint, binaryCodec } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * // A codec of our own: the binary codec behind a 4-byte prefix.
 * const MAGIC = new TextEncoder().encode("MINE");
 * const mine: Codec = {
 *   name: "mine",
 *   detect: (head) => MAGIC.every((b, i) => head[i] === b),
 *   encoder() {
 *     const inner = binaryCodec.encoder();
 *     const prefix = new TransformStream<Uint8Array, Uint8Array>({
 *       start: (c) => c.enqueue(MAGIC),
 *     });
 *     return { writable: inner.writable, readable: inner.readable.pipeThrough(prefix) };
 *   },
 *   decoder(limits) {
 *     let skip = MAGIC.length;
 *     const strip = new TransformStream<Uint8Array, Uint8Array>({
 *       transform(chunk, c) {
 *         const n = Math.min(skip, chunk.byteLength);
 *         skip -= n;
 *         if (n < chunk.byteLength) c.enqueue(chunk.subarray(n));
 *       },
 *     });
 *     const inner = binaryCodec.decoder(limits);
 *     strip.readable.pipeTo(inner.writable).catch(() => {});
 *     return { writable: strip.writable, readable: inner.readable };
 *   },
 * };
 * const chunks: Uint8Array[] = [];
 * await saveCheckpoint(new WritableStream({ write: (c) => { chunks.push(c.slice()); } }), {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([2]) }],
 * }, { codec: mine });
 * const back = await loadCheckpoint(ReadableStream.from(chunks), { codecs: [mine] });
 * assert.equal(back.tensors[0]!.data[0], 2);
 * ```
 */
export interface Codec {
  /** Short name, such as `"binary"`; shown by tools. */
  readonly name: string;
  /** Whether the leading bytes of a stream (up to {@linkcode DETECT_BYTES}) are this codec's. */
  detect(head: Uint8Array): boolean;
  /** A new encoder for one checkpoint. */
  encoder(options?: EncoderOptions): CheckpointEncoder;
  /** A new decoder for one checkpoint, enforcing the caps in `options`. */
  decoder(options?: DecoderOptions): CheckpointDecoder;
  /**
   * Optional random access: the metadata and only the named tensors of an (uncompressed) object
   * in this codec, read by ranges rather than streaming the whole object, each tensor verified as
   * far as the format allows. A name the object lacks is a `RangeError`.
   * `loadCheckpoint(address, { only })` uses it when present, over a local file, HTTP or S3.
   */
  readTensors?(source: RandomAccessReader, names: readonly string[], limits?: DecodeLimits): Promise<Checkpoint>;
}
