/**
 * Writing a sharded checkpoint: each writer writes its part (an ordinary ckpt binary file) under
 * the save attempt's parts directory, durably, then announces it with a done record; one
 * committer waits for every writer's record, checks the parts, and writes the manifest with a
 * create-only put. The checkpoint exists once the manifest does.
 *
 * @module
 */
import type { CheckpointInput, Metadata, TensorInput } from "../format/types.ts";
import type { ResolveOptions, StorageAddress } from "../storage/resolve.ts";
import type { ShardCoordinator } from "./_coordinate.ts";
import type { ShardManifest, ShardPart } from "./manifest.ts";
import type { ShardPlan } from "./plan.ts";

/** How long a committer waits for the writers' done records by default: 10 minutes. */
export const DEFAULT_SHARD_DEADLINE = 10 * 60 * 1000;

/** How often a committer looks for done records in the store by default, in milliseconds. */
export const DEFAULT_SHARD_POLL = 100;

/** A tensor a writer holds: the whole tensor, or (with `rows`) a row slice of it. */
export interface ShardTensorInput extends TensorInput {
  /**
   * The rows `[start, end)` along the first dimension that `data` holds, when the writer holds
   * only a slice; `shape` is then the whole tensor's and `data` has `end - start` rows.
   *
   * @default {undefined} (the whole tensor)
   */
  rows?: readonly [number, number];
}

/** What one writer of a sharded save holds. */
export interface ShardCheckpointInput {
  /** The checkpoint's metadata (the committer's goes into the manifest). */
  metadata: Metadata;
  /** The tensors (or slices) this writer holds. */
  tensors: Iterable<ShardTensorInput>;
}

/** Options shared by the functions that commit. */
export interface ShardCommitOptions {
  /** The save attempt: the same on every writer of one save, different for every attempt. See `isSaveId`. */
  saveId: string;
  /** How many writers the save has. */
  writers: number;
  /**
   * How long the committer waits for every writer's done record, in milliseconds; then the save
   * fails with a `ShardDeadlineError` naming the writers that did not finish, and nothing is
   * committed.
   *
   * @default {600000} ({@linkcode DEFAULT_SHARD_DEADLINE})
   */
  deadline?: number;
  /**
   * How writers announce their parts.
   *
   * @default {undefined} (through the store: done records beside the parts)
   */
  coordinator?: ShardCoordinator;
  /**
   * How often to look for done records in the store, in milliseconds.
   *
   * @default {100} ({@linkcode DEFAULT_SHARD_POLL})
   */
  poll?: number;
  /** Settings for `s3://` and `http(s)://` stores. */
  storage?: ResolveOptions;
  /** Cancels the save (or the wait); nothing is committed. */
  signal?: AbortSignal;
}

/** Options for {@linkcode saveShard}. */
export interface ShardSaveOptions extends ShardCommitOptions {
  /** This writer's index, 0 to `writers - 1`. */
  writer: number;
  /**
   * The global plan (from `planShards` over every writer's holdings). Required when writers
   * hold different tensors or slices.
   *
   * @default {undefined} (data-parallel: every writer holds what this one holds; planned here)
   */
  plan?: ShardPlan;
  /**
   * For the plan made here: the size from which a tensor is split across writers.
   *
   * @default {33554432} (`DEFAULT_SPLIT_BYTES`)
   */
  splitBytes?: number;
  /**
   * Whether this writer commits once every part is done.
   *
   * @default {writer === 0}
   */
  commit?: boolean;
  /**
   * Make the part (and the manifest) durable before announcing it (`fdatasync` and the
   * directory's `fsync` on a file system).
   *
   * @default {true}
   */
  sync?: boolean;
}

/** What {@linkcode saveShard} did. */
export interface ShardSaveResult {
  /** This writer's part. */
  part: ShardPart;
  /** When this writer committed: the manifest's digest, the sharded checkpoint's digest. */
  digest?: string;
  /** When this writer committed: the manifest written. */
  manifest?: ShardManifest;
}

/**
 * Writes one writer's part of a sharded checkpoint at `address` (a path, a `file:` or `s3://`
 * URL, `{ store, key }`), then its done record; the committer (writer 0 unless `commit` says
 * otherwise) then waits for every writer and commits the manifest at `address`. The part goes to
 * `<address>.parts/<saveId>/part-0000i-of-0000n.ckpt`. A losing committer of a race gets a
 * `ShardConflictError`, a committer whose writers did not all finish a `ShardDeadlineError`;
 * neither commits anything.
 *
 * @example
 * ```ts
 * import { saveShard } from "./write.ts";
 * import { loadCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const tensors = [
 *   { name: "a", dtype: "float32" as const, shape: [2], data: new Float32Array([1, 2]) },
 *   { name: "b", dtype: "float32" as const, shape: [1], data: new Float32Array([3]) },
 * ];
 * // Two data-parallel writers, each with a full replica (run here side by side).
 * const saves = [0, 1].map((writer) =>
 *   saveShard(`${dir}/step-1.ckpt`, { metadata: { step: 1 }, tensors }, { writer, writers: 2, saveId: "s1" })
 * );
 * const [first] = await Promise.all(saves);
 * assert.match(first!.digest!, /^[0-9a-f]{64}$/);
 * const back = await loadCheckpoint(`${dir}/step-1.ckpt`);
 * assert.deepEqual(back.tensors.map((t) => [t.name, [...t.data]]), [["a", [1, 2]], ["b", [3]]]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function saveShard(
  _address: StorageAddress,
  _checkpoint: ShardCheckpointInput,
  _options: ShardSaveOptions,
): Promise<ShardSaveResult> {
  throw new Error("not implemented");
}

/**
 * Commits a sharded save from outside its writers: waits for every writer's done record, checks
 * each part's size against its record and that the slices cover every tensor once, then writes
 * the manifest at `address` with a create-only put. `metadata` defaults to writer 0's.
 *
 * @example
 * ```ts
 * import { commitShards } from "./write.ts";
 * import { ShardDeadlineError } from "./errors.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await assert.rejects(
 *   commitShards(`${dir}/a.ckpt`, { saveId: "s1", writers: 2, deadline: 50 }),
 *   ShardDeadlineError,
 * );
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function commitShards(
  _address: StorageAddress,
  _options: ShardCommitOptions & { metadata?: Metadata },
): Promise<{ digest: string; manifest: ShardManifest }> {
  throw new Error("not implemented");
}

/** Options for {@linkcode saveSharded}. */
export interface SaveShardedOptions {
  /**
   * How many parts (writers, run concurrently in this thread) to split the checkpoint into.
   *
   * @default {2}
   */
  writers?: number;
  /**
   * The save attempt's id.
   *
   * @default {undefined} (a random one)
   */
  saveId?: string;
  /**
   * The size from which a tensor is split across writers.
   *
   * @default {33554432} (`DEFAULT_SPLIT_BYTES`)
   */
  splitBytes?: number;
  /**
   * Make the parts and the manifest durable.
   *
   * @default {true}
   */
  sync?: boolean;
  /** Settings for `s3://` and `http(s)://` stores. */
  storage?: ResolveOptions;
  /** Cancels the save; nothing is committed. */
  signal?: AbortSignal;
}

/**
 * Saves a whole checkpoint as a sharded one from this thread: `writers` parts written
 * concurrently, coordinated in memory, then committed.
 *
 * @example
 * ```ts
 * import { saveSharded } from "./write.ts";
 * import { loadCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const { manifest } = await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 3 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [4], data: new Uint8Array([1, 2, 3, 4]) }],
 * }, { writers: 2, splitBytes: 2 });
 * assert.equal(manifest.tensors[0]!.slices.length, 2);
 * assert.deepEqual([...(await loadCheckpoint(`${dir}/a.ckpt`)).tensors[0]!.data], [1, 2, 3, 4]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function saveSharded(
  _address: StorageAddress,
  _checkpoint: CheckpointInput & { tensors: readonly TensorInput[] },
  _options: SaveShardedOptions = {},
): Promise<{ digest: string; manifest: ShardManifest }> {
  throw new Error("not implemented");
}
