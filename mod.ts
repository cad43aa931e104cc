/**
 * ckpt: streaming checkpoints for TensorFlow.js training, on Deno.
 *
 * A checkpoint (metadata plus named tensors) flows through a codec (binary, JSON Lines, or your
 * own), optionally gzip, and an incremental SHA-256 into any sink: a file (written atomically), a
 * pipe, stdout, an HTTP body. Reading runs the same chain backwards and refuses corrupt bytes.
 *
 * @example
 * ```ts
 * import { loadCheckpoint, saveCheckpoint } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const path = await Deno.makeTempFile({ suffix: ".ckpt" });
 * const { digest } = await saveCheckpoint(path, {
 *   metadata: { step: 100, metrics: { loss: 0.125 } },
 *   tensors: [
 *     { name: "dense/kernel", dtype: "float32", shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) },
 *     { name: "optimizer/iter", dtype: "int64", shape: [], data: new BigInt64Array([100n]), group: "optimizer" },
 *   ],
 * }, { compression: "gzip" });
 *
 * const back = await loadCheckpoint(path, { sha256: digest });
 * assert.equal(back.metadata.step, 100);
 * assert.deepEqual(back.tensors[0]!.data, new Float32Array([1, 2, 3, 4]));
 * await Deno.remove(path);
 * ```
 *
 * @module
 */
export type {
  Checkpoint,
  CheckpointInput,
  CheckpointRecord,
  DType,
  JsonValue,
  Metadata,
  Tensor,
  TensorData,
  TensorInput,
} from "./src/format/types.ts";
export { ChecksumMismatchError } from "./src/format/errors.ts";
export { type DecodeLimits, DEFAULT_LIMITS, UNTRUSTED_LIMITS } from "./src/format/limits.ts";
export {
  type CheckpointDecoder,
  type CheckpointEncoder,
  type Codec,
  type DecoderOptions,
  DETECT_BYTES,
  type EncoderOptions,
  type RandomAccessReader,
} from "./src/format/codec.ts";
export { binaryCodec } from "./src/format/codecs/binary.ts";
export { jsonCodec } from "./src/format/codecs/json.ts";
export { type IndexEntry } from "./src/format/codecs/binary.ts";
export { type CheckpointIndex } from "./src/format/codecs/binary_file.ts";
export { type CodecName, type Compression, encodeCheckpoint, type EncodeOptions } from "./src/format/encode.ts";
export { type CheckpointBytes, type DecodeOptions, type SniffResult } from "./src/format/decode.ts";
// Registers safetensors with the format layer's codec registry, so every load recognises it.
export { DEFAULT_READ_CODECS } from "./src/interop/read_codecs.ts";
export {
  type CheckpointSource,
  decodeCheckpoint,
  readCheckpointIndex,
  sniffCheckpoint,
  type StorageOptions,
} from "./src/io/read.ts";
export { type CheckpointTarget, saveCheckpoint, type SaveOptions, type SaveResult } from "./src/io/save.ts";
export { loadCheckpoint, type LoadOptions } from "./src/io/load.ts";
export { type VerifiedTensor, verifyCheckpoint, type VerifyOptions, type VerifyResult } from "./src/io/verify.ts";
export {
  BACKGROUND_NICE,
  type BackgroundCheckpoint,
  BackgroundWriter,
  type BackgroundWriterOptions,
  DEFAULT_IDLE_TIMEOUT,
  DEFAULT_PRIORITY,
  DEFAULT_WHEN_BUSY,
  SupersededError,
  type WhenBusy,
  type WriterPriority,
} from "./src/background/writer.ts";
export { type DTypeInfo, DTYPES, type TypedArrayConstructor, validateTensor } from "./src/format/dtype.ts";
export {
  type BestBy,
  type BestPolicy,
  type CheckpointEntry,
  type CheckpointFileWriter,
  CheckpointManager,
  type CheckpointManagerOptions,
  type CopyFromOptions,
  DEFAULT_FILENAME,
  DEFAULT_MAX_TO_KEEP,
  DirectoryLockedError,
  INFERENCE_PRESET,
  type KeepReason,
  type ListedCheckpoint,
  type ManagedShardOptions,
  type ManagerSaveOptions,
  saveManagedShard,
  type ShardedSave,
  type TensorSummary,
  TRAINING_PRESET,
} from "./src/manager/mod.ts";
export {
  DEFAULT_GRACE_PERIOD,
  DEFAULT_POLL_INTERVAL,
  DEFAULT_PREEMPTION_SIGNALS,
  type Drainable,
  Preemption,
  type PreemptionNotice,
  type PreemptionOptions,
} from "./src/manager/preemption.ts";
export { type StopSignal } from "./src/runtime/signals.ts";
export {
  DEFAULT_CLOSE_TIMEOUT,
  DEFAULT_MAX_RETRY_DELAY,
  DEFAULT_MIRROR_OPTIONS,
  DEFAULT_RETRY_DELAY,
  MirroredManager,
  type MirroredManagerOptions,
  type MirrorStatus,
  type TieredCheckpoint,
} from "./src/manager/mirror.ts";
export { SavePolicy, type SavePolicyOptions, type SaveReason } from "./src/manager/save_policy.ts";
export {
  createSafetensorsCodec,
  safetensorsCodec,
  type SafetensorsCodecOptions,
  type SafetensorsEntry,
  type SafetensorsHeader,
  type SafetensorsTensorDescriptor,
} from "./src/interop/safetensors.ts";
export {
  readSafetensorsHeader,
  type ReadSafetensorsOptions,
  readSafetensorsTensors,
} from "./src/interop/safetensors_read.ts";
export { readSha256Sidecar, type SidecarOptions, writeSha256Sidecar } from "./src/interop/sidecar.ts";
export {
  type ByteRange,
  type GetOptions,
  type GetResult,
  type LocalFiles,
  type ObjectInfo,
  ObjectNotFoundError,
  type ObjectStore,
  type ObjectWriter,
  PreconditionFailedError,
  type PutMode,
  type PutOptions,
  StoreUnreachableError,
  type WriteOptions,
} from "./src/storage/types.ts";
export type { FileHandle, FileInfo, SeekWhence } from "./src/runtime/files.ts";
export { FileStore, type FileStoreOptions } from "./src/storage/file.ts";
export { HttpStatusError, HttpStore, type HttpStoreOptions } from "./src/storage/http.ts";
export { type CountingReader, openRandomAccess, type RandomAccessOptions } from "./src/storage/random_access.ts";
export {
  type DirectoryAddress,
  resolveDirectory,
  resolveObject,
  type ResolveOptions,
  type StorageAddress,
  type StoreObject,
} from "./src/storage/resolve.ts";
export { MemoryStore, type MemoryStoreOptions } from "./src/storage/memory.ts";
export { persistStorage, type StorageEstimate, storageEstimate, StorageFullError } from "./src/storage/quota.ts";
export {
  DEFAULT_S3_CONCURRENCY,
  DEFAULT_S3_PART_SIZE,
  DEFAULT_S3_RETRIES,
  DEFAULT_S3_TIMEOUT_MS,
  type S3Credentials,
  S3Error,
  type S3ErrorInit,
  S3Store,
  type S3StoreOptions,
} from "./src/storage/s3.ts";
export * from "./src/shard/mod.ts";
