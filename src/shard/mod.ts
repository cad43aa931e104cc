/**
 * Sharded checkpoints: one checkpoint written by several writers at once (worker threads,
 * processes, hosts), each writing its own part, committed by one manifest written last, and read
 * back whole or in shares by any number of readers.
 *
 * @example
 * ```ts
 * import { loadCheckpoint } from "../../mod.ts";
 * import { readShards, saveShard } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const dir = await Deno.makeTempDir();
 * const replica = [
 *   { name: "dense/kernel", dtype: "float32" as const, shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) },
 *   { name: "dense/bias", dtype: "float32" as const, shape: [2], data: new Float32Array([5, 6]) },
 * ];
 * // Each writer (here two async calls; in practice two processes) writes its half; writer 0 commits.
 * await Promise.all([0, 1].map((writer) =>
 *   saveShard(`${dir}/step-7.ckpt`, { metadata: { step: 7 }, tensors: replica }, { writer, writers: 2, saveId: "step-7" })
 * ));
 * const whole = await loadCheckpoint(`${dir}/step-7.ckpt`);
 * assert.equal(whole.metadata.step, 7);
 * const rows = await readShards(`${dir}/step-7.ckpt`, { rows: [{ tensor: "dense/kernel", start: 1, end: 2 }] });
 * assert.deepEqual([...rows.tensors[0]!.data], [3, 4]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */
export {
  channelCoordinator,
  type ChannelCoordinatorOptions,
  type DoneRecord,
  type DoneSlice,
  memoryCoordinator,
  type ShardCoordinator,
} from "./_coordinate.ts";
export { doneName, partName, ShardConflictError, ShardDeadlineError, ShardWriterError } from "./errors.ts";
export {
  decodeShardManifest,
  DEFAULT_SHARD_LIMITS,
  encodeShardManifest,
  isSaveId,
  isShardManifest,
  SHARD_MAGIC,
  SHARD_MANIFEST_VERSION,
  type ShardManifest,
  type ShardManifestLimits,
  type ShardPart,
  type ShardSlice,
  type ShardTensorEntry,
} from "./manifest.ts";
export {
  DEFAULT_SPLIT_BYTES,
  type PlannedSlice,
  type PlannedTensor,
  planShards,
  type ShardPlan,
  type ShardPlanOptions,
  type ShardTensor,
  slicesOf,
} from "./plan.ts";
export {
  commitShards,
  DEFAULT_SHARD_DEADLINE,
  DEFAULT_SHARD_POLL,
  saveShard,
  saveSharded,
  type SaveShardedOptions,
  type ShardCheckpointInput,
  type ShardCommitOptions,
  type ShardSaveOptions,
  type ShardSaveResult,
  type ShardTensorInput,
} from "./write.ts";
export {
  readShardManifest,
  readShards,
  type ShardReadOptions,
  type ShardRequest,
  type ShardVerifyResult,
  shareOf,
  verifyShards,
} from "./read.ts";
export { deleteShardedCheckpoint, listShardLeftovers, removeShardLeftovers, shardKeys } from "./leftovers.ts";
