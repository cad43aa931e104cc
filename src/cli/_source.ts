// A checkpoint named on the command line, opened for streaming: codec and compression found
// from the bytes, records decoded and verified one at a time, bytes counted (and hashed when
// asked) as they pass, and errors turned into messages that name the input.

import {
  type CheckpointRecord,
  ChecksumMismatchError,
  type Compression,
  DETECT_BYTES,
  type Metadata,
  sniffCheckpoint,
  type Tensor,
} from "../../mod.ts";
import { safetensorsCodec } from "../interop/safetensors.ts";
import { BINARY_MAGIC, binaryCodec, decodeRecords } from "../format/codecs/binary.ts";
import type { ByteReader } from "../format/_byte_reader.ts";
import { type Hash, sha256 } from "../format/_hash.ts";
import { settled } from "../format/_pair.ts";
import { readableFrom } from "../format/_streams.ts";
import { fileReader } from "../storage/_file_io.ts";
import { fileCodec } from "../io/read.ts";
import { UNTRUSTED_LIMITS } from "../format/limits.ts";
import {
  BadCheckpointError,
  type CliIO,
  FileError,
  type Input,
  isOsError,
  isStoreError,
  meter,
  openInput,
  Progress,
  readFailure,
  readHead,
  UsageError,
} from "./_io.ts";
import type { FileHandle } from "../runtime/files.ts";
import { isShardManifest, openShardedSource, partVerifier } from "./_sharded.ts";

/**
 * Codecs recognised besides the built-in ones: safetensors (from the interop module, which
 * imports no ML framework). Its loose detection never claims ckpt's binary or JSON bytes.
 */
export const EXTRA_CODECS = [safetensorsCodec] as const;

/** Whether a codec stores a digest after every record (ckpt's own do; safetensors has none). */
export function hasDigests(codec: string): boolean {
  return codec === "binary" || codec === "json" || codec === "sharded";
}

/** A checkpoint being read: its metadata is already decoded, its tensors come one at a time. */
export interface OpenCheckpoint {
  /** How messages name the input: its path or `stdin`. */
  readonly label: string;
  /** The path, when the input is a file. */
  readonly path: string | undefined;
  /** The codec's name, as found from the bytes. */
  readonly codec: string;
  /** The compression, as found from the bytes. */
  readonly compression: Compression;
  /** The metadata record. */
  readonly metadata: Metadata;
  /**
   * The tensors, each checked before it is handed out (against its digest, for codecs that have
   * them; the stream digest is checked when they end).
   */
  tensors(): AsyncGenerator<Tensor>;
  /** Bytes of input read so far. */
  bytes(): number;
  /** SHA-256 (hex) of every input byte, once all were read and hashing was asked for. */
  sha256(): string | undefined;
  /**
   * The stream digest the checkpoint stores (hex), once every tensor was read and it was checked;
   * `undefined` for codecs that store none (safetensors).
   */
  digest(): Promise<string | undefined>;
  /** Stops reading and clears the progress line. */
  close(): Promise<void>;
}

/**
 * The error to report for a failure while reading `label`: the CLI's own errors as they are,
 * OS errors as a {@linkcode FileError}, and the core's complaints about the bytes as a
 * {@linkcode BadCheckpointError}, each naming the input.
 */
export function readError(label: string, e: unknown): unknown {
  if (e instanceof FileError || e instanceof UsageError || e instanceof BadCheckpointError) return e;
  if (isOsError(e) || isStoreError(e)) return readFailure(label, e);
  if (e instanceof ChecksumMismatchError || e instanceof SyntaxError || e instanceof RangeError) {
    return new BadCheckpointError(`${label}: ${(e as Error).message}`, { cause: e });
  }
  return e;
}

/**
 * Opens a checkpoint (a path, or `-` for standard input) and decodes its metadata. Progress is
 * drawn on standard error when it is a terminal (unless `progress` is false).
 */
export async function openCheckpoint(
  spec: string,
  io: CliIO,
  options: { hash?: boolean; progress?: boolean; reuseBuffers?: boolean; bodies?: "keep" | "hash" } = {},
): Promise<OpenCheckpoint> {
  if (await isShardManifest(spec)) return await openSharded(spec, io, options);
  const input = await openInput(spec, io);
  const progress = new Progress(
    options.progress ?? true ? io : { ...io, stderrIsTerminal: false },
    `reading ${input.label}`,
    input.size,
  );
  if (input.file) {
    let codec;
    try {
      codec = await fileCodec(input.file, EXTRA_CODECS);
    } catch (e) {
      await input.stream.cancel();
      throw readError(input.label, e);
    }
    if (codec === binaryCodec) return await openBinaryFile(input, input.file, progress, options);
  }
  const metered = meter(input.stream, progress, options);
  let reader: ReadableStreamDefaultReader<CheckpointRecord> | undefined;
  let closed = false;
  const close = async () => {
    await progress.done();
    if (closed) return;
    closed = true;
    try {
      if (reader) await reader.cancel();
      else await metered.stream.cancel();
    } catch { /* already failed or finished */ }
  };
  try {
    // Standard input has no size to check beforehand: cap what it may expand to.
    const caps = input.path === undefined ? UNTRUSTED_LIMITS : {};
    const found = await sniffCheckpoint(metered.stream, { codecs: EXTRA_CODECS, ...caps });
    const limits = { reuseBuffers: options.reuseBuffers ?? false };
    let digest: () => Promise<string | undefined>;
    if (options.bodies === "hash" && found.codec === binaryCodec) {
      // Verified, not kept: tensor bodies hashed through two small buffers.
      const settle = settled<string>();
      const records = decodeRecords(found.bytes, limits, undefined, settle, "hash");
      reader = readableFrom(records).getReader();
      digest = () => settle.promise;
    } else {
      const decoder = found.codec.decoder(limits);
      reader = found.bytes.pipeThrough(decoder).getReader();
      digest = async () => decoder.digest ? await decoder.digest : undefined;
    }
    const r = reader;
    return await fromRecords(input, found.codec.name, () => r.read(), close, () => progress.done(), {
      compression: found.compression,
      bytes: metered.bytes,
      sha256: metered.sha256,
      digest,
    });
  } catch (e) {
    await close();
    throw readError(input.label, e);
  }
}

/**
 * A sharded checkpoint (src/shard): its manifest read and checked, then its tensors one at a time,
 * each slice checked against the digest the manifest pins. Verifying (`bodies: "hash"`) also reads
 * every part through and compares its stream digest with the manifest's. `digest()` is the
 * manifest's digest, the sharded checkpoint's.
 */
async function openSharded(
  spec: string,
  io: CliIO,
  options: { bodies?: "keep" | "hash" },
): Promise<OpenCheckpoint> {
  const verify = options.bodies === "hash"
    ? partVerifier((part) => openCheckpoint(part, io, { progress: false, bodies: "hash", reuseBuffers: true }), spec)
    : undefined;
  const source = await openShardedSource(spec, verify);
  return {
    label: spec,
    path: spec,
    codec: "sharded",
    compression: "none",
    metadata: source.manifest.metadata,
    tensors: source.tensors,
    bytes: source.bytes,
    sha256: () => undefined,
    digest: () => Promise.resolve(source.digest),
    close: () => Promise.resolve(),
  };
}

/**
 * The checkpoint a decoder's records give: the metadata record first (read here), then the
 * tensors on demand. `atEnd` runs once they ended; a failure closes the input and names it.
 */
async function fromRecords(
  input: Input,
  codec: string,
  next: () => Promise<ReadableStreamReadResult<CheckpointRecord> | IteratorResult<CheckpointRecord>>,
  close: () => Promise<void>,
  atEnd: () => Promise<void>,
  rest: Pick<OpenCheckpoint, "compression" | "bytes" | "sha256" | "digest">,
): Promise<OpenCheckpoint> {
  const first = await next();
  if (first.done || first.value.type !== "metadata") {
    throw new BadCheckpointError(`${input.label}: the ${codec} stream holds no metadata record`);
  }
  const tensors = async function* (): AsyncGenerator<Tensor> {
    try {
      for (;;) {
        const r = await next();
        if (r.done) break;
        if (r.value.type !== "tensor") {
          throw new BadCheckpointError(`${input.label}: a second metadata record after the first`);
        }
        yield r.value.tensor;
      }
      await atEnd();
    } catch (e) {
      await close();
      throw readError(input.label, e);
    }
  };
  return { label: input.label, path: input.path, codec, metadata: first.value.metadata, tensors, close, ...rest };
}

/**
 * A local uncompressed binary file, decoded from the open file as `loadCheckpoint` does: tensor
 * bodies are read straight into their buffers (no stream of chunks to join), and the file's own
 * SHA-256 is computed, in the same pass, only when `hash` asks for it.
 */
async function openBinaryFile(
  input: Input,
  file: FileHandle,
  progress: Progress,
  options: { hash?: boolean; reuseBuffers?: boolean; bodies?: "keep" | "hash" },
): Promise<OpenCheckpoint> {
  // Bytes read here, plus those a second thread verified (skipped here): every byte checked once.
  let bytes = 0;
  const plain = fileReader(file, input.path);
  const counted: ByteReader = {
    ...plain,
    async read(into) {
      const n = await plain.read(into);
      if (n !== null) {
        bytes += n;
        progress.add(n);
      }
      return n;
    },
    async seekTo(offset) {
      await plain.seekTo!(offset);
      progress.add(offset - bytes);
      bytes = offset;
    },
  };
  const tap: Hash | undefined = options.hash ? sha256() : undefined;
  let fileDigest: string | undefined;
  const digest = settled<string>();
  const records = decodeRecords(counted, { reuseBuffers: options.reuseBuffers ?? false }, tap, digest, options.bodies);
  let closed = false;
  const close = async () => {
    await progress.done();
    if (closed) return;
    closed = true;
    try {
      await records.return(undefined);
    } catch { /* already failed */ }
    await input.stream.cancel(); // closes the file
  };
  try {
    const atEnd = async () => {
      fileDigest = tap?.digest("hex");
      await close();
    };
    return await fromRecords(input, binaryCodec.name, () => records.next(), close, atEnd, {
      compression: "none",
      bytes: () => bytes,
      sha256: () => fileDigest,
      digest: () => digest.promise,
    });
  } catch (e) {
    await close();
    throw readError(input.label, e);
  }
}

/**
 * What lets a file be read without reading its tensor data: an uncompressed binary file's
 * trailing index, a safetensors header, or nothing (gzip, JSON).
 */
export async function indexedKind(path: string): Promise<"index" | "header" | undefined> {
  let head: Uint8Array;
  try {
    head = await readHead(path, DETECT_BYTES);
  } catch (e) {
    throw readFailure(path, e);
  }
  if (head.byteLength >= BINARY_MAGIC.byteLength && BINARY_MAGIC.every((b, i) => head[i] === b)) return "index";
  if (head[0] === 0x1f && head[1] === 0x8b) return undefined;
  if (safetensorsCodec.detect(head)) return "header";
  return undefined;
}
