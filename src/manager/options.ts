/**
 * The manager's options, their defaults, and the training and inference presets.
 *
 * @module
 */
import type { Codec } from "../format/codec.ts";
import type { CodecName, Compression } from "../format/encode.ts";
import type { DecodeLimits } from "../format/limits.ts";
import type { SaveOptions, SaveResult } from "../io/save.ts";
import type { CheckpointInput } from "../format/types.ts";
import type { ResolveOptions } from "../storage/resolve.ts";

/** The default of {@linkcode CheckpointManagerOptions.maxToKeep}: the newest 5 checkpoints are kept. */
export const DEFAULT_MAX_TO_KEEP = 5;
/** The default of {@linkcode CheckpointManagerOptions.filename}: `step-000000100.ckpt` for step 100. */
export const DEFAULT_FILENAME = "step-{step:9}.ckpt";

/**
 * Anything that saves a checkpoint to a path atomically, as `saveCheckpoint` does: the
 * `BackgroundWriter` fits, and so does `checkpointWriter.fileWriter` of the tfjs adapter's
 * `CheckpointWriter` class (a different thing: it snapshots models), so encoding and hashing leave
 * the training thread.
 */
export interface CheckpointFileWriter {
  /**
   * Writes `checkpoint` to `path` atomically and resolves with the bytes written and their
   * SHA-256. For a manager on a local directory `path` is a file path; for a manager on a store
   * with an `address` (OPFS, say) it is the object's address, such as
   * `opfs:///runs/demo/step-000000010-3f9a.ckpt`, which `saveCheckpoint` and a `BackgroundWriter`
   * take as they take a path.
   */
  save(path: string, checkpoint: CheckpointInput, options: SaveOptions): Promise<SaveResult>;
}

/** Keep the best checkpoints by a metric, whatever their age. */
export interface BestPolicy {
  /** The metric's name in `metadata.metrics`, such as `"val_loss"`. */
  metric: string;
  /** Whether lower (`"min"`) or higher (`"max"`) is better. */
  mode: "min" | "max";
  /**
   * How many of the best to keep.
   *
   * @default {1}
   */
  keep?: number;
}

/** What `best()` and `bestStep()` rank by: a metric, and whether lower or higher is better. */
export type BestBy = Omit<BestPolicy, "keep">;

/** Options for `CheckpointManager.open`. */
export interface CheckpointManagerOptions {
  /**
   * The newest checkpoints to keep (by step); older ones are deleted after each save unless
   * `keepEvery` or `best` keeps them. `Infinity` keeps all.
   *
   * @default {5}
   */
  maxToKeep?: number;
  /**
   * Keep every checkpoint whose step is a multiple of this, forever.
   *
   * @default {undefined} (none)
   */
  keepEvery?: number;
  /**
   * Keep one checkpoint per period of this many seconds of save time, forever (Orbax's
   * `keep_time_interval`): the first, then each saved at least this long after the previous one
   * kept this way. `3600` keeps one an hour however often a run saves.
   *
   * @default {undefined} (none)
   */
  keepTimeInterval?: number;
  /**
   * Never delete the best `keep` checkpoints by a metric. Checkpoints without the metric (or
   * with NaN) never count as best.
   *
   * @default {undefined} (none)
   */
  best?: BestPolicy;
  /**
   * The codec of full checkpoint files. A codec object of your own is also recognised on load.
   *
   * @default {"binary"}
   */
  codec?: CodecName | Codec;
  /**
   * Compression of full checkpoint files, or of the tensor blobs of incremental ones (`"gzip"`
   * only; `"bytegroup"` is for full binary checkpoints).
   *
   * @default {"none"}
   */
  compression?: Compression;
  /**
   * The file name of each checkpoint: `{step}` is the step, `{step:N}` the step zero-padded to N
   * digits. An incremental checkpoint's manifest is this name plus `.manifest.json`.
   *
   * @default {"step-{step:9}.ckpt"}
   */
  filename?: string;
  /**
   * Incremental checkpoints: tensors are stored once each, by the SHA-256 of their bytes, under
   * `blobs/`; each checkpoint is a manifest that references them, so a tensor whose bytes did
   * not change (frozen layers, buffers) is not written again.
   *
   * @default {false}
   */
  incremental?: boolean;
  /**
   * Save only tensors of these groups (such as `["params"]`); the others are left out.
   *
   * @default {undefined} (all groups)
   */
  groups?: readonly string[];
  /**
   * On load, check a full checkpoint file's SHA-256 against the one recorded when it was saved,
   * on top of the per-record digests the codec always checks. Blobs and manifests of incremental
   * checkpoints are always checked.
   *
   * @default {true}
   */
  verify?: boolean;
  /**
   * What writes full checkpoint files, such as a background writer; never used for incremental
   * checkpoints (their blobs are written by the manager itself). On a store it needs the store's
   * `address` (an `OpfsStore` from `OpfsStore.open` and `opfs:` directories have one, an
   * in-memory or S3 store does not): the writer is given addresses, not the store.
   *
   * @default {undefined} (`saveCheckpoint` in this thread)
   */
  writer?: CheckpointFileWriter;
  /**
   * Flush files and directories to disk before a save counts as committed. Turning it off keeps
   * atomicity against crashes of the process, not against power loss.
   *
   * @default {true}
   */
  sync?: boolean;
  /**
   * Page reuse, in a local directory: when retention is about to delete a full checkpoint because of a save, that
   * checkpoint is taken out of the index first and its file is recycled for the save (renamed to
   * the temporary name and overwritten in place), as databases recycle log segments: no new
   * block allocation, and where the save goes through the page cache (`directWrites: false`,
   * or no FFI) no fresh page-cache pages, which on a VM makes a steady-state save run like an
   * in-place write. Only a checkpoint retention would delete once the new one is
   * committed is recycled, never one kept as recent, every-N or best, never the newest (what a
   * crash resumes from; so `maxToKeep: 1` never recycles), nor an incremental one. If that save
   * then fails or is killed, the recycled checkpoint is gone too (it was already out of the
   * index), and a process reading it at that moment fails verification; repeated kills each
   * lose one more (the kill test saw two of a run's retained checkpoints gone). Off by default
   * for that reason: deleting after the commit keeps every retained checkpoint across crashes.
   *
   * @default {false}
   */
  recycle?: boolean;
  /**
   * Open without the lock and without cleaning up, to look at a directory another process may
   * be writing (as `ckpt ls` does). `save()` and `delete()` then throw. The view re-reads the
   * index on every call, and takes the retention rules (`maxToKeep`, `keepEvery`, `best`) that
   * the writer recorded there for any of them not given, so `list()` shows what is kept and why.
   * A damaged index is reported through `onWarning`, and the view shows what a writer would
   * rebuild it from (the checkpoint files that verify), renaming and writing nothing.
   *
   * @default {false}
   */
  readOnly?: boolean;
  /**
   * Where warnings go: a skipped corrupt or missing checkpoint, a stale lock taken over, leftovers
   * of an interrupted save removed.
   *
   * @default {console.warn}
   */
  onWarning?: (message: string) => void;
  /**
   * Settings for the store an `s3://` or `http(s)://` directory address resolves to (endpoint,
   * region, credentials, part size); what is not given comes from the `AWS_*` environment
   * variables, then the shared AWS files (`~/.aws/credentials`, `~/.aws/config`, profile
   * `AWS_PROFILE`). Not used when the directory is a path or an `ObjectStore`.
   *
   * @default {undefined} (the environment)
   */
  storage?: ResolveOptions;
  /**
   * Limits applied when loading.
   *
   * @default {DEFAULT_LIMITS}
   */
  limits?: DecodeLimits;
}

/**
 * The training preset: the whole state (model, buffers and optimizer), uncompressed for speed,
 * and verified against the recorded SHA-256 on load. Spread it into the options:
 * `CheckpointManager.open(dir, { ...TRAINING_PRESET, maxToKeep: 3 })`.
 *
 * @example
 * ```ts
 * import { TRAINING_PRESET } from "./mod.ts";
 * import assert from "node:assert/strict";
 * assert.equal(TRAINING_PRESET.compression, "none");
 * assert.equal(TRAINING_PRESET.verify, true);
 * ```
 */
export const TRAINING_PRESET: Readonly<CheckpointManagerOptions> = Object.freeze({
  codec: "binary",
  compression: "none",
  verify: true,
});

/**
 * The inference preset: what a model needs to run — parameters and buffers (groups `"params"` and
 * `"buffers"`, such as batch-norm moving statistics; optimizer state and other groups left out),
 * gzip-compressed, verified on load.
 *
 * @example
 * ```ts
 * import { CheckpointManager, INFERENCE_PRESET } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const manager = await CheckpointManager.open(dir, INFERENCE_PRESET);
 * await manager.save({
 *   metadata: { step: 1 },
 *   tensors: [
 *     { name: "w", dtype: "float32", shape: [1], data: new Float32Array([1]) },
 *     { name: "adam/m", dtype: "float32", shape: [1], data: new Float32Array([0]), group: "optimizer" },
 *   ],
 * });
 * assert.deepEqual((await manager.load()).tensors.map((t) => t.name), ["w"]);
 * await manager.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export const INFERENCE_PRESET: Readonly<CheckpointManagerOptions> = Object.freeze({
  codec: "binary",
  compression: "gzip",
  groups: Object.freeze(["params", "buffers"]),
  verify: true,
});
