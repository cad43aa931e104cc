/**
 * What the manager reports about committed checkpoints.
 *
 * @module
 */
import type { DType, Metadata } from "../format/types.ts";
import type { KeepReason } from "./_retention.ts";

/** A committed checkpoint: what `save()` resolves with and what `list()` describes. */
export interface CheckpointEntry {
  /** Training step, from the checkpoint's metadata. */
  step: number;
  /** The checkpoint file, or for an incremental checkpoint its manifest. */
  path: string;
  /** `"full"`: one checkpoint file; `"incremental"`: a manifest referencing tensor blobs; `"sharded"`: a shard manifest naming parts written by several writers (see docs/sharding.md). */
  kind: "full" | "incremental" | "sharded";
  /** Bytes the checkpoint occupies on disk (for an incremental one: manifest plus all the blobs it references). */
  bytes: number;
  /** Bytes its save wrote (for an incremental one: the manifest and only the blobs that were new). */
  bytesWritten: number;
  /**
   * The checkpoint's digest, lowercase hex, which `loadCheckpoint(path, { sha256 })` and
   * `ckpt verify --sha256` accept: for a file the manager saved in ckpt's binary or JSON codec,
   * its stream digest (stored in the file, what `ckpt inspect` prints; no second pass over the
   * bytes on save); for an incremental checkpoint, the SHA-256 of its manifest; otherwise (an
   * index rebuilt from the files, a codec that stores no digest) the file's SHA-256.
   */
  sha256: string;
  /** When the save was committed, ISO 8601 (wall clock; not part of the checkpoint's bytes). */
  savedAt: string;
  /** The checkpoint's metadata: step, epoch, createdAt, metrics, custom. */
  metadata: Metadata;
  /** How many tensors it holds. */
  tensorCount: number;
}

/** A tensor as `CheckpointManager.list` describes it, without its data. */
export interface TensorSummary {
  /** Tensor name. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** Dimensions. */
  shape: number[];
  /** Group, such as `"params"`. */
  group: string;
}

/** One checkpoint as `CheckpointManager.list` reports it. */
export interface ListedCheckpoint extends CheckpointEntry {
  /**
   * Why retention keeps it: `"recent"` (among the newest), `"every"` (a `keepEvery` multiple),
   * `"time"` (kept for its `keepTimeInterval` period), `"best"`.
   */
  keptBy: KeepReason[];
  /** Whether it is among the best `best.keep` by the `best` metric. */
  best: boolean;
  /** Its rank among the best (1 = best), when it is one of them. */
  bestRank?: number;
  /**
   * `"ok"` when its files are present with the recorded sizes and (binary files, manifests) their
   * headers and indexes verify; `"missing"` or `"damaged"` otherwise, with `problem` saying why.
   * Tensor data is not read: `load()` checks every digest.
   */
  status: "ok" | "missing" | "damaged";
  /** What is wrong, when `status` is not `"ok"`. */
  problem?: string;
  /** The tensors, read from the binary file's index or the manifest; absent for gzip and JSON files. */
  tensors?: TensorSummary[];
}
