/**
 * Verifying a checkpoint without loading it: every digest checked, no tensor kept.
 *
 * @module
 */
import type { Codec } from "../format/codec.ts";
import { DTYPES, elementCount } from "../format/dtype.ts";
import type { DecodeLimits } from "../format/limits.ts";
import type { DType, Metadata } from "../format/types.ts";
import { checkStorageOptions } from "../storage/_storage_options.ts";
import { checkOptionNames, LIMIT_OPTION_NAMES, optionNames } from "../format/_options.ts";
import { verifiedRecords } from "./load.ts";
import type { CheckpointSource, StorageOptions } from "./read.ts";

/** Options for {@linkcode verifyCheckpoint}. */
export interface VerifyOptions extends DecodeLimits, StorageOptions {
  /** Codecs of your own to recognise, tried before ckpt binary, ckpt JSON and safetensors. */
  codecs?: readonly Codec[];
  /**
   * A digest (64 hex digits) the checkpoint must match, as in `loadCheckpoint`: its stream
   * digest or the SHA-256 of the source's bytes. A mismatch is a `ChecksumMismatchError`.
   */
  sha256?: string;
  /**
   * A verify of a local ckpt binary file of 64 MiB or more hashes on two threads (Deno): a Worker
   * opens the same file (checked to be the same by device and inode) and reads and hashes every
   * other tensor of 1 MiB or more itself (decoding a byte-grouped one first), while this thread
   * reads and hashes the rest. Otherwise (a smaller file, another source), where FFI is granted,
   * each byte-grouped tensor of 1 MiB or more is decoded a part at a time while libcrypto hashes
   * the part before on Deno's blocking thread pool. `false` keeps to one thread; `true` also uses
   * a second thread for other sources (see `DecoderOptions.parallelHash`).
   */
  parallelHash?: boolean;
}

/** A tensor {@linkcode verifyCheckpoint} checked: all but its data. */
export interface VerifiedTensor {
  /** Its name. */
  name: string;
  /** Its element type. */
  dtype: DType;
  /** Its dimensions. */
  shape: readonly number[];
  /** What it is for (`"params"` unless the checkpoint says otherwise). */
  group: string;
  /** The size of its data in bytes (decoded: a byte-grouped tensor's raw size). */
  byteLength: number;
}

/** What {@linkcode verifyCheckpoint} found, everything in it checked. */
export interface VerifyResult {
  /** The checkpoint's metadata. */
  metadata: Metadata;
  /** Its tensors in stored order, without their data. */
  tensors: VerifiedTensor[];
  /** The stream digest (hex) the format stores and the read checked; `undefined` for codecs that store none. */
  digest: string | undefined;
}

/** Every option {@linkcode verifyCheckpoint} takes; any other name is a `TypeError`. */
const VERIFY_OPTION_NAMES = optionNames<VerifyOptions>()([
  "codecs",
  "sha256",
  "parallelHash",
  "storage",
  ...LIMIT_OPTION_NAMES,
]);

/**
 * Verifies a checkpoint from any source `loadCheckpoint` reads, as a load would (every record
 * digest, the stream digest, bool values, the caps, and `sha256` when given), without keeping
 * its tensors. A ckpt binary checkpoint's bodies are hashed piece by piece through two reused
 * 1 MiB buffers, so memory stays at a few MiB whatever the size of the checkpoint or its largest
 * tensor, and no fresh memory is touched per tensor (byte-grouped bodies are decoded first,
 * since their digests cover the decoded bytes); from a large local file, on two threads (see
 * `parallelHash`). Other codecs decode each tensor into one reused buffer. It returns only when
 * everything checked out; errors are those of `loadCheckpoint`.
 *
 * @example
 * ```ts
 * import { saveCheckpoint, verifyCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * const saved = await saveCheckpoint(path, {
 *   metadata: { step: 7 },
 *   tensors: [{ name: "w", dtype: "float32", shape: [2, 3], data: new Float32Array(6) }],
 * });
 * const ok = await verifyCheckpoint(path);
 * assert.equal(ok.metadata.step, 7);
 * assert.deepEqual(ok.tensors, [{ name: "w", dtype: "float32", shape: [2, 3], group: "params", byteLength: 24 }]);
 * assert.equal(ok.digest, saved.digest);
 * await Deno.remove(path);
 * ```
 */
export async function verifyCheckpoint(source: CheckpointSource, options: VerifyOptions = {}): Promise<VerifyResult> {
  checkOptionNames(options, VERIFY_OPTION_NAMES, "Cannot verify checkpoint");
  checkStorageOptions(options.storage, "Cannot verify checkpoint");
  const { records, digest, checkDigest } = await verifiedRecords(source, { ...options, reuseBuffers: true }, "hash");
  let metadata: Metadata | undefined;
  const tensors: VerifiedTensor[] = [];
  for await (const record of records) {
    if (record.type === "metadata") {
      metadata = record.metadata;
      continue;
    }
    const { name, dtype, shape, group } = record.tensor;
    const byteLength = elementCount(shape) * DTYPES[dtype].bytes;
    tensors.push({ name, dtype, shape, group, byteLength });
  }
  if (!metadata) throw new SyntaxError("Cannot decode checkpoint: no metadata record");
  await checkDigest();
  return { metadata, tensors, digest: await digest };
}
