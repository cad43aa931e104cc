/**
 * Bytes to checkpoint records: recognise gzip and the codec from the bytes themselves, then
 * decode record by record.
 *
 * @module
 */
import { type Codec, type DecoderOptions, DETECT_BYTES } from "./codec.ts";
import { binaryCodec, decodeRecords, FLAG_BYTEGROUP, HEADER_BYTES } from "./codecs/binary.ts";
import { BUILTIN_CODECS, type Compression } from "./encode.ts";
import { readCodecs } from "./codec_registry.ts";
import type { CheckpointRecord } from "./types.ts";
import { settled } from "./_pair.ts";
import { iterate, readableFrom } from "./_streams.ts";
import { type DecodeLimits, resolveLimits } from "./limits.ts";

/** Checkpoint bytes: all at once (a `Uint8Array`, a `Blob`), a `Response`'s body, or a stream. (`loadCheckpoint` and friends also take addresses.) */
export type CheckpointBytes =
  | Uint8Array
  | Blob
  | Response
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>;

/**
 * Options for {@linkcode decodeCheckpoint} and `loadCheckpoint`: the caps, `reuseBuffers` (for one-pass consumers;
 * `loadCheckpoint` never uses it) and codecs of your own.
 */
export interface DecodeOptions extends DecoderOptions {
  /**
   * Codecs of your own to recognise, tried before the ones recognised by default
   * (`DEFAULT_READ_CODECS`: ckpt binary, ckpt JSON, safetensors).
   *
   * @default {[]}
   */
  codecs?: readonly Codec[];
}

/** What {@linkcode sniffCheckpoint} found. */
export interface SniffResult {
  /** The codec whose bytes these are. */
  codec: Codec;
  /** Whether the bytes were gzip-compressed, or a binary stream holds byte-grouped tensors. */
  compression: Compression;
  /** The codec's bytes (decompressed), from the first byte. */
  bytes: ReadableStream<Uint8Array>;
}

const GZIP_MAGIC = [0x1f, 0x8b];

/**
 * Bytes as a stream: a `Blob` (a `File` too) or a `Response` as its body; streams unchanged.
 *
 * @example
 * ```ts
 * import { bytesStream } from "./decode.ts";
 * import assert from "node:assert/strict";
 * const s = bytesStream(new Blob([new Uint8Array([1, 2])]));
 * assert.deepEqual(new Uint8Array(await new Response(s).arrayBuffer()), new Uint8Array([1, 2]));
 * ```
 */
export function bytesStream(source: CheckpointBytes): ReadableStream<Uint8Array> {
  if (source instanceof Uint8Array) return readableFrom([source]);
  if (typeof Blob === "function" && source instanceof Blob) return source.stream();
  if (typeof Response === "function" && source instanceof Response) return responseBody(source);
  if (source instanceof ReadableStream) return source;
  if (source !== null && typeof source === "object" && Symbol.asyncIterator in source) {
    return readableFrom(source);
  }
  throw new TypeError(
    "Cannot read checkpoint: source must be a path, a file: URL, a storage address, a Uint8Array, a Blob, a Response, a ReadableStream or an AsyncIterable",
  );
}

function responseBody(response: Response): ReadableStream<Uint8Array> {
  const where = response.url ? ` from ${response.url}` : "";
  if (!response.ok) {
    response.body?.cancel().catch(() => {});
    throw new TypeError(`Cannot read checkpoint${where}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  }
  if (response.bodyUsed) throw new TypeError(`Cannot read checkpoint${where}: the response body was already read`);
  return response.body ?? readableFrom<Uint8Array>([]);
}

async function peek(stream: ReadableStream<Uint8Array>): Promise<[Uint8Array, ReadableStream<Uint8Array>]> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let have = 0;
  try {
    while (have < DETECT_BYTES) {
      const r = await reader.read();
      if (r.done) break;
      if (!(r.value instanceof Uint8Array)) {
        throw new TypeError("Cannot decode checkpoint: stream chunk is not a Uint8Array");
      }
      chunks.push(r.value);
      have += r.value.byteLength;
    }
  } catch (e) {
    await reader.cancel().catch(() => {});
    reader.releaseLock();
    throw e;
  }
  const head = new Uint8Array(Math.min(have, DETECT_BYTES));
  let at = 0;
  for (const c of chunks) {
    if (at >= head.byteLength) break;
    head.set(c.subarray(0, head.byteLength - at), at);
    at += Math.min(c.byteLength, head.byteLength - at);
  }
  // The replay is a stream of its own rather than a generator: cancelling a generator that never
  // started skips its `finally`, so a replay refused before its first read (bytes no codec
  // recognises) left the source, and the file under it, open.
  let released = false;
  const release = async (cancel: boolean) => {
    if (released) return;
    released = true;
    if (cancel) await reader.cancel().catch(() => {});
    reader.releaseLock();
  };
  const replay = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const held = chunks.shift();
      if (held) return controller.enqueue(held);
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        await release(true);
        throw e;
      }
      if (r.done) {
        await release(false);
        controller.close();
      } else controller.enqueue(r.value);
    },
    // Stopped early (an error downstream, or a cancel): stop the source too, so a file closes now.
    cancel: () => release(true),
  }, { highWaterMark: 0 });
  return [head, replay];
}

function hex(head: Uint8Array): string {
  return [...head.subarray(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join(" ");
}

/** Compressed bytes handed to the decompressor at a time (deflate expands at most about 1032:1). */
const GZIP_PIECE = 16 * 1024;
/** Output after which `maxCompressionRatio` is checked (a stream's first bytes may expand a lot). */
const RATIO_GRACE = 2 ** 20;

async function* gunzip(bytes: ReadableStream<Uint8Array>, limits: Required<DecodeLimits>): AsyncGenerator<Uint8Array> {
  let read = 0;
  let out = 0;
  const counted = bytes.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      // Small pieces: the decompressor turns each input chunk into one output chunk, so a 1 MiB
      // chunk of a hostile stream would come out as up to 1 GiB at once, before any cap could act.
      transform(c, controller) {
        for (let i = 0; i < c.byteLength; i += GZIP_PIECE) {
          const piece = c.subarray(i, i + GZIP_PIECE);
          read += piece.byteLength;
          controller.enqueue(piece);
        }
      },
    }),
  );
  const ratio = limits.maxCompressionRatio;
  try {
    for await (
      const c of iterate(
        counted.pipeThrough(new DecompressionStream("gzip") as ReadableWritablePair<Uint8Array, Uint8Array>),
      )
    ) {
      out += c.byteLength;
      if (out > RATIO_GRACE && out > ratio * read) {
        throw new RangeError(
          `Cannot decode checkpoint: gzip stream expands ${read} compressed bytes to over ${out}, past maxCompressionRatio ${ratio}`,
        );
      }
      yield c;
    }
  } catch (e) {
    if (e instanceof Error && /^Cannot decode/.test(e.message)) throw e;
    throw new SyntaxError(
      `Cannot decode checkpoint: gzip stream is corrupt or truncated after ${out} decompressed bytes (${
        (e as Error)?.message ?? e
      })`,
    );
  }
}

/** The bytes unchanged, failing once more than `max` have passed. */
async function* capped(bytes: ReadableStream<Uint8Array>, max: number, gzip: boolean): AsyncGenerator<Uint8Array> {
  let n = 0;
  for await (const c of iterate(bytes)) {
    n += c.byteLength;
    if (n > max) {
      await bytes.cancel().catch(() => {});
      throw new RangeError(
        `Cannot decode checkpoint: more than maxDecodedBytes ${max} bytes${gzip ? " of gzip content" : ""} to decode`,
      );
    }
    yield c;
  }
}

/** "ckpt binary, ckpt JSON, safetensors", after the caller's own codecs: for "nothing recognised" messages. */
export function formatsTried(codecs: readonly Codec[] = []): string {
  const defaults = readCodecs();
  const names = [...codecs.filter((c) => !defaults.includes(c)), ...defaults].map((c) =>
    c === BUILTIN_CODECS.binary ? "ckpt binary" : c === BUILTIN_CODECS.json ? "ckpt JSON" : c.name
  );
  return [...new Set(names)].join(", ");
}

/**
 * The first codec (the caller's, then the default ones: {@linkcode readCodecs}) that claims these leading bytes (up to
 * {@linkcode DETECT_BYTES}), or `undefined` (gzip, or nothing recognised).
 *
 * @example
 * ```ts
 * import { detectCodec } from "./decode.ts";
 * import { encodeCheckpoint } from "./encode.ts";
 * import assert from "node:assert/strict";
 * const bytes = new Uint8Array(await new Response(encodeCheckpoint({ metadata: { step: 0 }, tensors: [] })).arrayBuffer());
 * assert.equal(detectCodec(bytes.subarray(0, 64))?.name, "binary");
 * ```
 */
export function detectCodec(head: Uint8Array, codecs: readonly Codec[] = []): Codec | undefined {
  return [...codecs, ...readCodecs()].find((c) => c.detect(head));
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
export async function sniffCheckpoint(source: CheckpointBytes, options: DecodeOptions = {}): Promise<SniffResult> {
  const limits = resolveLimits(options);
  let [head, bytes] = await peek(bytesStream(source));
  if (head.byteLength === 0) throw new SyntaxError("Cannot decode checkpoint: the stream is empty");
  let compression: Compression = "none";
  if (head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1]) {
    compression = "gzip";
    [head, bytes] = await peek(readableFrom(gunzip(bytes, limits)));
    if (head.byteLength === 0) throw new SyntaxError("Cannot decode checkpoint: the gzip stream holds no bytes");
  }
  const codec = detectCodec(head, options.codecs);
  if (!codec) {
    await bytes.cancel();
    throw new SyntaxError(
      `Cannot decode checkpoint: unrecognised format at offset 0${
        compression === "gzip" ? " of the gzip content" : ""
      } (first bytes ${hex(head)}); tried ${formatsTried(options.codecs)}${compression === "gzip" ? "" : ", gzip"}`,
    );
  }
  if (compression === "none" && codec === binaryCodec && head.byteLength >= HEADER_BYTES) {
    const flags = new DataView(head.buffer, head.byteOffset, HEADER_BYTES).getUint32(12, true);
    if (flags & FLAG_BYTEGROUP) compression = "bytegroup";
  }
  if (limits.maxDecodedBytes !== Infinity) {
    bytes = readableFrom(capped(bytes, limits.maxDecodedBytes, compression === "gzip"));
  }
  return { codec, compression, bytes };
}

/**
 * A checkpoint's records, one at a time: the metadata first, then each tensor once its digest
 * has been checked, so a consumer can handle checkpoints larger than memory. The stream errors
 * (`ChecksumMismatchError`, `SyntaxError`, `RangeError`) when the bytes are corrupt, truncated or
 * over a limit; it completes only after the whole-stream digest has been checked.
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
  source: CheckpointBytes,
  options: DecodeOptions = {},
): ReadableStream<CheckpointRecord> {
  return readableFrom(decodeWithDigest(source, options).records);
}

/**
 * Like {@linkcode decodeCheckpoint}, and also the checkpoint's stream digest (hex), settled once
 * the records have ended and it has been checked; `undefined` for codecs that store none. The
 * promise rejects when the records end any other way (nobody needs to catch it).
 *
 * With `bodies: "hash"`, tensors are verified and not kept: a ckpt binary checkpoint's tensor
 * records then carry an empty array as their data, every body hashed piece by piece through two
 * small buffers (see `ChunkReader.hashBody`); other codecs decode as usual.
 */
export function decodeWithDigest(
  source: CheckpointBytes,
  options: DecodeOptions = {},
  bodies: "keep" | "hash" = "keep",
): { records: AsyncGenerator<CheckpointRecord>; digest: Promise<string | undefined> } {
  const digest = settled<string | undefined>();
  async function* records(): AsyncGenerator<CheckpointRecord> {
    try {
      const { codec, bytes } = await sniffCheckpoint(source, options);
      if (bodies === "hash" && codec === binaryCodec) {
        const stream = settled<string>();
        yield* decodeRecords(bytes, options, undefined, stream, "hash");
        digest.resolve(await stream.promise);
        return;
      }
      const decoder = codec.decoder(options);
      yield* iterate(bytes.pipeThrough(decoder));
      digest.resolve(decoder.digest ? await decoder.digest : undefined);
    } finally {
      digest.reject(new Error("Cannot give the checkpoint digest: the stream did not end intact"));
    }
  }
  return { records: records(), digest: digest.promise };
}
