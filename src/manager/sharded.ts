/**
 * Sharded saves through the manager: the manager (the committer) writes its part, waits for the
 * other writers' parts, commits the step's manifest, and only then adds the step to its index.
 * Writers in other processes or on other hosts write their parts with
 * {@linkcode saveManagedShard} into the same directory or `s3://` prefix.
 *
 * @module
 */
import type { CheckpointInput, TensorInput } from "../format/types.ts";
import { sha256 } from "../format/_hash.ts";
import { checkOptionNames, optionNames } from "../format/_options.ts";
import { iterate } from "../format/_streams.ts";
import { FileStore } from "../storage/file.ts";
import { resolveDirectory, type ResolveOptions } from "../storage/resolve.ts";
import type { ObjectStore } from "../storage/types.ts";
import { isSaveId } from "../shard/manifest.ts";
import { saveShard, type ShardSaveResult } from "../shard/write.ts";
import { compilePattern, type FilenamePattern } from "./_pattern.ts";
import { DEFAULT_FILENAME } from "./options.ts";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** How a manager save is split into parts ({@linkcode ManagerSaveOptions.shards}). */
export interface ShardedSave {
  /** How many writers (parts) the save has. */
  writers: number;
  /**
   * The save attempt's id, the same on every writer of this save and different for every
   * attempt (see `isSaveId`). Required when other processes write parts
   * ({@linkcode ShardedSave.external}); the checkpoint's file name is derived from it and the step.
   *
   * @default {undefined} (a random one, for writers in this process)
   */
  saveId?: string;
  /**
   * Whether writers 1 to `writers - 1` are other processes or hosts that call
   * {@linkcode saveManagedShard}; this manager then writes part 0 itself and commits. When
   * false, this process writes every part, concurrently.
   *
   * @default {false}
   */
  external?: boolean;
  /**
   * How long to wait for the other writers' parts, in milliseconds; past it the save fails with
   * a `ShardDeadlineError` naming them and nothing is committed.
   *
   * @default {600000} (`DEFAULT_SHARD_DEADLINE`)
   */
  deadline?: number;
  /**
   * How often to look for the other writers' done records, in milliseconds.
   *
   * @default {100} (`DEFAULT_SHARD_POLL`)
   */
  poll?: number;
  /**
   * The size from which a tensor is split across writers (the same on every writer).
   *
   * @default {33554432} (`DEFAULT_SPLIT_BYTES`)
   */
  splitBytes?: number;
}

/** Options for one `CheckpointManager.save`. */
export interface ManagerSaveOptions {
  /**
   * Save the checkpoint sharded: a number of parts written by this process, or a
   * {@linkcode ShardedSave}. Not with `incremental`.
   *
   * @default {undefined} (one file)
   */
  shards?: number | ShardedSave;
}

const SAVE_OPTION_NAMES = optionNames<ManagerSaveOptions>()(["shards"]);
const SHARDED_NAMES = optionNames<ShardedSave>()(["writers", "saveId", "external", "deadline", "poll", "splitBytes"]);

/** A checked sharded save: `saveId` filled in. */
export type ResolvedShards = ShardedSave & { saveId: string };

/** Checks a save's options; the sharded save they ask for, or `undefined`. */
export function resolveSaveOptions(options: ManagerSaveOptions, context: string): ResolvedShards | undefined {
  if (typeof options !== "object" || options === null) throw new TypeError(`${context}: options must be an object`);
  checkOptionNames(options, SAVE_OPTION_NAMES, context);
  const s = options.shards;
  if (s === undefined) return undefined;
  const shards: ShardedSave = typeof s === "number" ? { writers: s } : s;
  if (typeof shards !== "object" || shards === null) {
    throw new TypeError(`${context}: shards must be a number of writers or { writers, saveId, external }`);
  }
  checkOptionNames(shards, SHARDED_NAMES, context, {}, "shards.");
  if (!Number.isSafeInteger(shards.writers) || shards.writers < 1) {
    throw new RangeError(`${context}: shards.writers must be a positive integer, got ${shards.writers}`);
  }
  if (shards.external && shards.saveId === undefined) {
    throw new TypeError(
      `${context}: shards.saveId is required when other processes write parts (every writer passes the same one)`,
    );
  }
  const saveId = shards.saveId ?? `s-${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  if (!isSaveId(saveId)) {
    throw new TypeError(
      `${context}: shards.saveId ${
        JSON.stringify(saveId)
      } must be 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit`,
    );
  }
  return { ...shards, saveId };
}

/**
 * The name of a sharded save's manifest in the directory: the pattern's unique name for the step
 * with a token derived from `saveId`, so every writer computes it and no two attempts share it.
 */
export function shardedName(pattern: FilenamePattern, step: number, saveId: string): string {
  return pattern.formatUnique(step, sha256().update(new TextEncoder().encode(saveId)).digest("hex").slice(0, 12));
}

/** Every tensor of a checkpoint as an array (a sharded save plans over all of them). */
export async function tensorArray(tensors: CheckpointInput["tensors"]): Promise<TensorInput[]> {
  if (Array.isArray(tensors)) return tensors as TensorInput[];
  const all: TensorInput[] = [];
  for await (const t of iterate(tensors as AsyncIterable<TensorInput>)) all.push(t);
  return all;
}

/** Options for {@linkcode saveManagedShard}. */
export interface ManagedShardOptions {
  /** This writer's index, 1 to `writers - 1` (writer 0 is the manager that commits). */
  writer: number;
  /** How many writers the save has, as the committing manager was told. */
  writers: number;
  /** The save attempt's id, as the committing manager was told. */
  saveId: string;
  /**
   * The manager's `filename` pattern.
   *
   * @default {"step-{step:9}.ckpt"} (`DEFAULT_FILENAME`)
   */
  filename?: string;
  /**
   * The size from which a tensor is split across writers, as the committing manager was told.
   *
   * @default {33554432} (`DEFAULT_SPLIT_BYTES`)
   */
  splitBytes?: number;
  /**
   * Make the part durable before announcing it.
   *
   * @default {true}
   */
  sync?: boolean;
  /** Settings for `s3://` directories. */
  storage?: ResolveOptions;
  /** Cancels the write. */
  signal?: AbortSignal;
}

const MANAGED_SHARD_NAMES = optionNames<ManagedShardOptions>()([
  "writer",
  "writers",
  "saveId",
  "filename",
  "splitBytes",
  "sync",
  "storage",
  "signal",
]);

/** The store of a checkpoint directory given as a path, a `file:` or `s3://` URL, or a store. */
function directoryStore(dir: string | URL | ObjectStore, storage: ResolveOptions | undefined): ObjectStore {
  if (typeof dir === "object" && !(dir instanceof URL)) return dir;
  const text = dir instanceof URL ? dir.href : dir;
  if (typeof text !== "string" || text === "") {
    throw new TypeError("Cannot save managed shard: expected a directory path, a URL or an ObjectStore");
  }
  if (/^file:/i.test(text)) return new FileStore(fileURLToPath(text));
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return resolveDirectory(text, storage);
  return new FileStore(resolve(text));
}

/**
 * Writes one writer's part of a sharded manager save into the manager's directory (a path, a
 * `file:` or `s3://` URL, or a store): the manager that commits is writer 0 and calls
 * `save(checkpoint, { shards: { writers, saveId, external: true } })`; every other writer, in
 * another process or on another host, calls this with the same step (`metadata.step`), tensors
 * (data-parallel replicas), `writers` and `saveId`. The part counts once the manager commits.
 *
 * @example
 * ```ts
 * import { CheckpointManager, saveManagedShard } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const manager = await CheckpointManager.open(dir);
 * const checkpoint = {
 *   metadata: { step: 1 },
 *   tensors: [
 *     { name: "a", dtype: "float32" as const, shape: [2], data: new Float32Array([1, 2]) },
 *     { name: "b", dtype: "float32" as const, shape: [1], data: new Float32Array([3]) },
 *   ],
 * };
 * const shards = { writers: 2, saveId: "step-1-try-1", external: true };
 * // Writer 1 would be another process; here it runs beside the manager.
 * const [entry] = await Promise.all([
 *   manager.save(checkpoint, { shards }),
 *   saveManagedShard(dir, checkpoint, { writer: 1, writers: 2, saveId: shards.saveId }),
 * ]);
 * assert.equal(entry.kind, "sharded");
 * assert.deepEqual([...(await manager.latest())!.tensors[1]!.data], [3]);
 * await manager.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function saveManagedShard(
  dir: string | URL | ObjectStore,
  checkpoint: CheckpointInput,
  options: ManagedShardOptions,
): Promise<ShardSaveResult> {
  checkOptionNames(options, MANAGED_SHARD_NAMES, "Cannot save managed shard");
  const { writer, writers } = options;
  if (!Number.isSafeInteger(writer) || writer < 1 || !(writer < writers)) {
    throw new RangeError(
      `Cannot save managed shard: writer must be an integer from 1 to writers - 1 (writer 0 is the manager), got ${writer} of ${writers}`,
    );
  }
  const store = directoryStore(dir, options.storage);
  const key = shardedName(
    compilePattern(options.filename ?? DEFAULT_FILENAME),
    checkpoint.metadata.step,
    options.saveId,
  );
  return await saveShard({ store, key }, {
    metadata: checkpoint.metadata,
    tensors: await tensorArray(checkpoint.tensors),
  }, {
    writer,
    writers,
    saveId: options.saveId,
    commit: false,
    ...(options.splitBytes === undefined ? {} : { splitBytes: options.splitBytes }),
    ...(options.sync === undefined ? {} : { sync: options.sync }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}
