/**
 * The checkpoint manager: a crash-safe directory of checkpoints with retention, resume and
 * incremental saves.
 *
 * Every save is written to a temporary name, fsynced and renamed into place, then committed by
 * atomically replacing `index.json`, the list of committed checkpoints ordered by step. A crash at
 * any moment leaves every committed checkpoint loadable; opening the directory again cleans up
 * what an interrupted save left behind. A lock file keeps a second writer out.
 *
 * @example
 * ```ts
 * import { CheckpointManager } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const manager = await CheckpointManager.open(dir, { maxToKeep: 2 });
 * for (const step of [10, 20, 30]) {
 *   await manager.save({
 *     metadata: { step, metrics: { loss: 1 / step } },
 *     tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([step, -step]) }],
 *   });
 * }
 * assert.deepEqual((await manager.list()).map((e) => e.step), [20, 30]);
 * const latest = await manager.latest();
 * assert.deepEqual(latest?.tensors[0]!.data, new Float32Array([30, -30]));
 * await manager.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */
import { checkCheckpointObject } from "../format/_checkpoint_input.ts";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadCheckpoint } from "../io/load.ts";
import { readCheckpointIndex } from "../io/read.ts";
import { bytesOf, validateTensor } from "../format/dtype.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import { validateMetadata } from "../format/metadata.ts";
import { knownBytes, saveCheckpoint, type SaveOptions, type SaveResult } from "../io/save.ts";
import type { Checkpoint, CheckpointInput, TensorInput } from "../format/types.ts";
import { sha256 } from "../format/_hash.ts";
import { SavePromise } from "../background/_protocol.ts";
import { SaveLedger } from "../background/_saves.ts";
import { FileStore, makeDirectory } from "../storage/file.ts";
import { objectAddress, resolveDirectory } from "../storage/resolve.ts";
import { ObjectNotFoundError, type ObjectStore, PreconditionFailedError, type PutMode } from "../storage/types.ts";
import {
  blobKey,
  BLOBS_DIR,
  decodeManifest,
  digestOf,
  encodeManifest,
  type ManifestTensor,
  readIncremental,
  writeBlob,
} from "./_blobs.ts";
import type { CheckpointEntry, ListedCheckpoint, TensorSummary } from "./entry.ts";
import type { BestBy, CheckpointManagerOptions } from "./options.ts";
import { ioError, isDamage, isNotFound, notFound } from "./_errors.ts";
import { copyCommitted } from "./_copy.ts";
import { INDEX_FILE, readIndex, type StoredEntry, writeIndex } from "./_index.ts";
import { Location } from "./_location.ts";
import { DirectoryLock } from "./_lock.ts";
import { MANIFEST_SUFFIX, saveToken } from "./_pattern.ts";
import { adopt, MAX_MANIFEST_BYTES, startsWithBinary } from "./_recovery.ts";
import { inProcessWriter, policyOf, type Resolved, resolveOptions } from "./_resolve.ts";
import { resolveBestBy } from "./_option_names.ts";
import { bestSteps, retention, type RetentionPolicy } from "./_retention.ts";
import { iterate } from "../format/_streams.ts";
import { OsErrors } from "../runtime/errors.ts";
import { files, readDirAll } from "../runtime/files.ts";
import { readShardManifest } from "../shard/read.ts";
import { deleteShardedCheckpoint, removeShardLeftovers } from "../shard/leftovers.ts";
import { saveShard, saveSharded } from "../shard/write.ts";
import {
  type ManagerSaveOptions,
  type ResolvedShards,
  resolveSaveOptions,
  shardedName,
  tensorArray,
} from "./sharded.ts";

export type { CheckpointEntry, ListedCheckpoint, TensorSummary } from "./entry.ts";
export {
  type BestBy,
  type BestPolicy,
  type CheckpointFileWriter,
  type CheckpointManagerOptions,
  DEFAULT_FILENAME,
  DEFAULT_MAX_TO_KEEP,
  INFERENCE_PRESET,
  TRAINING_PRESET,
} from "./options.ts";
export { DirectoryLockedError } from "./_lock.ts";
export type { KeepReason } from "./_retention.ts";
export { type ManagedShardOptions, type ManagerSaveOptions, saveManagedShard, type ShardedSave } from "./sharded.ts";

/** Options for {@linkcode CheckpointManager.copyFrom}. */
export interface CopyFromOptions {
  /**
   * Awaited before each chunk (up to 4 MiB, or one part of an S3 destination) of a byte-for-byte
   * copy is read, and before it is verified: a caller paces the copy with it (a `MirroredManager`
   * waits there while its local tier writes a save, so replication never competes with a save
   * for the CPU). Not called when the copy re-encodes.
   *
   * @default {undefined} (as fast as the stores go)
   */
  pace?: () => Promise<void>;
}

/** Whether `x` is an {@linkcode ObjectStore} rather than a path or URL. */
function isStore(x: unknown): x is ObjectStore {
  const o = x as Partial<ObjectStore> | null;
  return typeof o === "object" && o !== null && !(o instanceof URL) && typeof o.url === "string" &&
    typeof o.get === "function" && typeof o.put === "function" && typeof o.list === "function";
}

/** Writes a checkpoint to a store object through its streaming writer; nothing is published on failure. */
async function saveToStore(
  store: ObjectStore,
  key: string,
  checkpoint: CheckpointInput,
  options: SaveOptions,
): Promise<SaveResult> {
  const known = knownBytes(checkpoint); // lets a store refuse early what it cannot hold (OPFS quota)
  const writer = await store.writer(key, { sync: options.sync ?? true, ...(known > 0 ? { sizeHint: known } : {}) });
  let result: SaveResult;
  try {
    result = await saveCheckpoint(new WritableStream({ write: (chunk) => writer.write(chunk) }), checkpoint, options);
  } catch (e) {
    await writer.abort(e).catch(() => {});
    throw e;
  }
  await writer.close();
  return result;
}

/**
 * A directory of checkpoints: crash-safe saves, retention, verified loads and incremental saves.
 * Open one with {@linkcode CheckpointManager.open}; close it with `close()` (or `await using`).
 *
 * @example
 * ```ts
 * import { CheckpointManager } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * {
 *   await using manager = await CheckpointManager.open(dir, {
 *     maxToKeep: 1,
 *     best: { metric: "loss", mode: "min" },
 *   });
 *   for (const [step, loss] of [[1, 0.5], [2, 0.1], [3, 0.3]] as const) {
 *     await manager.save({
 *       metadata: { step, metrics: { loss } },
 *       tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([step]) }],
 *     });
 *   }
 *   const listed = await manager.list();
 *   assert.deepEqual(listed.map((e) => [e.step, e.best]), [[2, true], [3, false]]);
 *   assert.equal((await manager.load(2)).metadata.metrics?.loss, 0.1);
 * }
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class CheckpointManager {
  #loc: Location;
  #o: Resolved;
  #lock: DirectoryLock | undefined;
  /** On an object store (no lock): this manager's id, written into the index it commits. */
  #writerId: string | undefined;
  #entries: StoredEntry[] = [];
  /** The version of the index object as this manager last read or wrote it. */
  #version: string | undefined;
  /** Set once another writer has taken over the index: every later save or delete throws it. */
  #fenced: Error | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #pending = 0;
  #failures = new SaveLedger("checkpoint saves", false);
  #closed = false;

  private constructor(loc: Location, o: Resolved, lock: DirectoryLock | undefined) {
    this.#loc = loc;
    this.#o = o;
    this.#lock = lock;
    this.#writerId = lock === undefined && !o.readOnly ? crypto.randomUUID() : undefined;
  }

  /**
   * Opens (creating if needed) a checkpoint directory: takes its lock (a stale lock of a dead
   * process is taken over with a warning), reads the index, removes temporary files and
   * uncommitted files of interrupted saves, and warns about committed checkpoints whose files are
   * missing or have the wrong size. Throws {@linkcode DirectoryLockedError} when another manager
   * has it open for writing.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(`${dir}/run-1`, { maxToKeep: 3, keepEvery: 1000 });
   * assert.equal(await manager.latest(), undefined);
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  static async open(
    dir: string | URL | ObjectStore,
    options: CheckpointManagerOptions = {},
  ): Promise<CheckpointManager> {
    const o = resolveOptions(options);
    if (isStore(dir)) return await CheckpointManager.#openStore(dir, o);
    if (dir instanceof URL) {
      if (dir.protocol !== "file:") {
        throw new TypeError(`Cannot open checkpoint directory ${dir.href}: only file: URLs`);
      }
      dir = fileURLToPath(dir);
    }
    if (typeof dir !== "string" || dir === "") {
      throw new TypeError("Cannot open checkpoint directory: expected a path, a URL or an ObjectStore");
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(dir)) {
      // s3://bucket/prefix, http(s)://host/dir (read-only): the store the address names.
      if (!/^file:/i.test(dir)) return await CheckpointManager.#openStore(resolveDirectory(dir, o.storage), o);
      dir = fileURLToPath(dir);
    }
    const path = resolve(dir);
    if (!o.readOnly) {
      try {
        await makeDirectory(path, o.sync);
      } catch (e) {
        throw ioError(`Cannot create checkpoint directory ${path}`, e);
      }
    }
    const info = await files.stat(path).catch((e) => {
      throw ioError(`Cannot open checkpoint directory ${path}`, e);
    });
    if (!info.isDirectory) throw new TypeError(`Cannot open checkpoint directory ${path}: it is not a directory`);
    const lock = o.readOnly ? undefined : await DirectoryLock.acquire(path, o.onWarning);
    try {
      const manager = new CheckpointManager(new Location(new FileStore(path), path), o, lock);
      await manager.#start();
      return manager;
    } catch (e) {
      await lock?.release();
      throw e;
    }
  }

  static async #openStore(store: ObjectStore, o: Resolved): Promise<CheckpointManager> {
    if (!o.readOnly && !store.writable) {
      throw new TypeError(`Cannot open checkpoint directory ${store.url} for writing: the store is read-only`);
    }
    if (o.writer !== inProcessWriter && store.address === undefined) {
      throw new TypeError(
        `Invalid option writer: it is given addresses to write, and ${store.url} has none (leave writer out; an OPFS store opened with OpfsStore.open has one)`,
      );
    }
    const manager = new CheckpointManager(new Location(store), o, undefined);
    await manager.#start();
    return manager;
  }

  /**
   * Reads the index (rebuilding it from the checkpoint files when absent or damaged), and for a
   * writer: on an object store takes over the index (see {@linkcode CheckpointManager.#claim}),
   * then cleans up what interrupted saves left behind. Finally warns about missing files.
   */
  async #start(): Promise<void> {
    const loc = this.#loc;
    const o = this.#o;
    const read = await readIndex(loc).catch((e) => {
      if (!(e instanceof SyntaxError)) throw e;
      o.onWarning(
        o.readOnly
          ? `${e.message}; showing what a writing manager would rebuild from the checkpoint files in ${loc.where} (nothing is rewritten)`
          : `${e.message}; rebuilding it from the checkpoint files in ${loc.where}`,
      );
      return { contents: undefined, version: undefined, damaged: true };
    });
    if (o.readOnly) {
      o.stored = read.contents?.retention;
      // A damaged index: the entries a writer would adopt, found without renaming or writing anything.
      this.#entries = read.contents?.entries ?? ("damaged" in read ? await adopt(loc, o) : []);
    } else {
      // A damaged index is replaced: its version is read again to replace exactly it.
      this.#version = "damaged" in read ? (await loc.store.head(INDEX_FILE))?.version : read.version;
      if (read.contents) this.#entries = read.contents.entries;
      else this.#entries = await adopt(loc, o);
      // Written even when empty: from now on a checkpoint file the index does not list is
      // uncommitted. On an object store it is always written, to take over from earlier writers.
      if (!read.contents || this.#writerId !== undefined) await this.#claim();
      await this.#cleanUp();
    }
    await this.#checkFiles();
  }

  /**
   * Writes the index at open. On an object store there is no lock: writing it (with this
   * manager's id, so its bytes and version change) fences off any earlier writer, whose next
   * conditional commit then fails instead of committing files this open may clean up.
   */
  async #claim(): Promise<void> {
    try {
      this.#version = (await writeIndex(this.#loc, this.#entries, this.#policy(), this.#indexMode(), this.#writerId))
        .version;
    } catch (e) {
      if (e instanceof PreconditionFailedError) {
        throw new PreconditionFailedError(
          this.#loc.name(INDEX_FILE),
          "another manager opened this checkpoint directory for writing at the same time; open it again",
          { cause: e },
        );
      }
      throw ioError(`Cannot open checkpoint directory ${this.#loc.where}: the index could not be written`, e);
    }
  }

  /** The directory: its absolute path, or for an object store the store's URL. */
  get dir(): string {
    return this.#loc.where;
  }

  /** Whether a save is queued or being written. */
  get pending(): boolean {
    return this.#pending > 0;
  }

  /**
   * Saves a checkpoint (its step is `metadata.step`, which must be above every committed step)
   * and resolves with the committed entry once the file and the index are on disk. Retention then
   * deletes what it no longer keeps. At most one save is in flight: a save called while another
   * runs starts when that one has finished, so the tensors' data must stay unchanged until the
   * returned promise settles (tfjs snapshots are immutable copies). A failure rejects the promise,
   * leaves every earlier checkpoint intact and the directory without partial files, and is
   * reported again by `flush()`.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir);
   * const entry = await manager.save({
   *   metadata: { step: 100, metrics: { loss: 0.25 } },
   *   tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
   * });
   * assert.equal(entry.step, 100);
   * assert.equal(entry.bytes, (await Deno.stat(entry.path)).size);
   * assert.match(entry.sha256, /^[0-9a-f]{64}$/);
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  save(checkpoint: CheckpointInput, options: ManagerSaveOptions = {}): Promise<CheckpointEntry> {
    this.#failures.throwUnreported();
    this.#assertWritable("save a checkpoint");
    const shards = resolveSaveOptions(options, "Cannot save checkpoint");
    const { promise, resolve, reject } = SavePromise.create<CheckpointEntry>();
    this.#enqueue(() => this.#save(checkpoint, shards)).then(resolve, (e) => {
      this.#failures.failed(e, promise);
      reject(e);
    });
    return promise;
  }

  /**
   * Waits until no save is in flight, then rejects with the first error of a save that failed
   * since the last `flush()` (each error is reported once), or resolves.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir);
   * const tensors = [{ name: "w", dtype: "float32" as const, shape: [1], data: new Float32Array([1]) }];
   * manager.save({ metadata: { step: 1 }, tensors }); // not awaited: training goes on
   * manager.save({ metadata: { step: 2 }, tensors }); // waits for the first
   * await manager.flush();
   * assert.deepEqual((await manager.list()).map((e) => e.step), [1, 2]);
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async flush(): Promise<void> {
    while (this.#pending > 0) await this.#tail;
    this.#failures.throwUnreported();
  }

  /**
   * The newest committed checkpoint that loads and verifies. An entry whose files are missing or
   * fail their digests is skipped with a warning (through `onWarning`) in favour of the next
   * older one, and (unless the manager is read-only) quarantined: taken out of the index and its
   * file renamed to `.NAME.damaged` beside it, kept for inspection. A damaged checkpoint is then no
   * longer committed, so training resumed from the older one can save the steps after it again.
   * Resolves with `undefined` when there is none.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const warnings: string[] = [];
   * const manager = await CheckpointManager.open(dir, { onWarning: (m) => warnings.push(m) });
   * const tensors = [{ name: "w", dtype: "uint8" as const, shape: [1], data: new Uint8Array([7]) }];
   * await manager.save({ metadata: { step: 1 }, tensors });
   * const second = await manager.save({ metadata: { step: 2 }, tensors });
   * await Deno.truncate(second.path, 10); // damage the newest file
   * assert.equal((await manager.latest())?.metadata.step, 1);
   * assert.match(warnings[0]!, /Skipping checkpoint step 2 .*moved aside to .*\.step-000000002\.ckpt\.damaged/);
   * await manager.save({ metadata: { step: 2 }, tensors }); // step 2 is no longer committed
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async latest(): Promise<Checkpoint | undefined> {
    const entries = await this.#current();
    for (let i = entries.length - 1; i >= 0; i--) {
      const entry = entries[i]!;
      try {
        return await this.#load(entry);
      } catch (e) {
        if (!isDamage(e)) throw e;
        const aside = this.#o.readOnly ? undefined : await this.#quarantine(entry);
        const moved = aside === undefined
          ? ""
          : aside === null
          ? "; no longer committed"
          : `; moved aside to ${aside} and no longer committed`;
        this.#o.onWarning(
          `Skipping checkpoint step ${entry.step} in ${this.#loc.where}: ${(e as Error).message}${moved}${
            i > 0 ? "; falling back to an older one" : ""
          }`,
        );
      }
    }
    return undefined;
  }

  /**
   * The step of the best committed checkpoint by a metric (as Orbax's `best_step()`): `by`, or
   * when omitted the manager's own `best` rule. Checkpoints without the metric, or with NaN, do
   * not count; between equal values the newer wins. `undefined` when none has the metric.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir, { best: { metric: "val_loss", mode: "min" } });
   * for (const [step, val_loss] of [[1, 0.5], [2, 0.2], [3, 0.3]] as const) {
   *   await manager.save({ metadata: { step, metrics: { val_loss } }, tensors: [] });
   * }
   * assert.equal(await manager.bestStep(), 2);
   * assert.equal(await manager.bestStep({ metric: "val_loss", mode: "max" }), 1);
   * assert.equal((await manager.best())?.metadata.step, 2);
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async bestStep(by?: BestBy): Promise<number | undefined> {
    const rule = resolveBestBy(by, this.#policy().best);
    return bestSteps(await this.#current(), { ...rule, keep: 1 })[0];
  }

  /**
   * The best committed checkpoint by a metric (see {@linkcode CheckpointManager.bestStep}),
   * loaded and verified as `load(step)` loads it; `undefined` when none has the metric.
   */
  async best(by?: BestBy): Promise<Checkpoint | undefined> {
    const step = await this.bestStep(by);
    return step === undefined ? undefined : await this.load(step);
  }

  /**
   * Loads a committed checkpoint, verified: the given step, or when omitted the newest that loads
   * (as `latest()`, but throwing a `RangeError` when there is none). A step that is not committed
   * is a `RangeError`; a missing file `Deno.errors.NotFound`; corrupt bytes
   * {@linkcode ChecksumMismatchError} or `SyntaxError`.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir);
   * await manager.save({ metadata: { step: 3 }, tensors: [] });
   * assert.equal((await manager.load(3)).metadata.step, 3);
   * await assert.rejects(() => manager.load(4), RangeError);
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async load(step?: number): Promise<Checkpoint> {
    if (step === undefined) {
      const latest = await this.latest();
      if (!latest) throw new RangeError(`Cannot load checkpoint: ${this.#loc.where} holds no loadable checkpoint`);
      return latest;
    }
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new TypeError(`Cannot load checkpoint: step ${step} is not a non-negative integer`);
    }
    const entry = (await this.#current()).find((e) => e.step === step);
    if (!entry) {
      throw new RangeError(`Cannot load checkpoint: no committed checkpoint for step ${step} in ${this.#loc.where}`);
    }
    return await this.#load(entry);
  }

  /**
   * The committed checkpoints, ordered by step, with metadata, metrics, sizes, digests and why
   * retention keeps each, read from the index and each file's header and index (binary files) or
   * manifest (incremental checkpoints): no tensor data is read. Problems show as `status` and
   * `problem` rather than errors, so a damaged directory can still be listed.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir);
   * await manager.save({
   *   metadata: { step: 5, metrics: { loss: 0.5 } },
   *   tensors: [{ name: "w", dtype: "float32", shape: [2, 2], data: new Float32Array(4) }],
   * });
   * await manager.close();
   * const view = await CheckpointManager.open(dir, { readOnly: true });
   * const [entry] = await view.list();
   * assert.equal(entry!.status, "ok");
   * assert.deepEqual(entry!.tensors, [{ name: "w", dtype: "float32", shape: [2, 2], group: "params" }]);
   * assert.equal(entry!.metadata.metrics?.loss, 0.5);
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async list(): Promise<ListedCheckpoint[]> {
    const entries = await this.#current();
    const reasons = retention(entries, this.#policy());
    const ranks = bestSteps(entries, this.#policy().best);
    const out: ListedCheckpoint[] = [];
    for (const e of entries) {
      const listed: ListedCheckpoint = {
        ...this.#public(e),
        keptBy: reasons.get(e.step) ?? [],
        best: ranks.includes(e.step),
        status: "ok",
      };
      if (listed.best) listed.bestRank = ranks.indexOf(e.step) + 1;
      try {
        listed.tensors = await this.#describe(e);
      } catch (err) {
        listed.status = isNotFound(err) ? "missing" : "damaged";
        listed.problem = (err as Error).message;
      }
      if (listed.tensors === undefined) delete listed.tensors;
      out.push(listed);
    }
    return out;
  }

  /**
   * Copies committed checkpoint `step` of `source` (another manager) into this one and commits it
   * here, as `save()` would: the same step, metadata and tensors, after every step committed here.
   * When this manager writes whole files with the codec and compression `source` was opened with
   * (not `incremental`, no `groups`), the source's file goes up as it is, without decoding it into
   * tensors or encoding it again: it streams to this manager's store through the verification a
   * load runs (every record digest and the stream digest, which must be the one the source's
   * index recorded), and the object is published and committed only once that passed. A file
   * damaged since its commit is aborted, nothing is committed here, and the promise rejects as
   * `load()` would ({@linkcode ChecksumMismatchError}, `SyntaxError`). Otherwise the checkpoint
   * is loaded (verified) from `source` and saved here. Waits for a save in flight, as `save()`.
   *
   * @param source The manager to copy from (read-only or not).
   * @param step A step committed in `source`; another is a `RangeError`.
   * @param options See {@linkcode CopyFromOptions}.
   * @returns This manager's entry for the copy.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const root = await Deno.makeTempDir();
   * const local = await CheckpointManager.open(`${root}/local`);
   * const saved = await local.save({
   *   metadata: { step: 7 },
   *   tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([1, 2]) }],
   * });
   * const remote = await CheckpointManager.open(`${root}/remote`);
   * const copied = await remote.copyFrom(local, 7);
   * assert.equal(copied.sha256, saved.sha256); // the same bytes
   * assert.deepEqual((await remote.load(7)).tensors[0]!.data, new Float32Array([1, 2]));
   * await remote.close();
   * await local.close();
   * await Deno.remove(root, { recursive: true });
   * ```
   */
  copyFrom(source: CheckpointManager, step: number, options: CopyFromOptions = {}): Promise<CheckpointEntry> {
    if (typeof options !== "object" || options === null) throw new TypeError("Invalid options: expected an object");
    for (const name of Object.keys(options)) {
      if (name !== "pace") throw new TypeError(`Invalid option ${name}: copyFrom takes only pace`);
    }
    if (options.pace !== undefined && typeof options.pace !== "function") {
      throw new TypeError("Invalid option pace: expected a function");
    }
    if (!(source instanceof CheckpointManager)) {
      throw new TypeError("Cannot copy checkpoint: the source is not a CheckpointManager");
    }
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new TypeError(`Cannot copy checkpoint: step ${step} is not a non-negative integer`);
    }
    this.#failures.throwUnreported();
    this.#assertWritable("copy a checkpoint");
    return this.#enqueue(() => this.#copy(source, step, options.pace));
  }

  /**
   * Deletes a committed checkpoint: it leaves the index first, then its file (and blobs no other
   * checkpoint references) are removed. Waits for a save in flight. A step that is not committed
   * is a `RangeError`.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir);
   * await manager.save({ metadata: { step: 1 }, tensors: [] });
   * await manager.save({ metadata: { step: 2 }, tensors: [] });
   * await manager.delete(2);
   * assert.deepEqual((await manager.list()).map((e) => e.step), [1]);
   * await manager.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  delete(step: number): Promise<void> {
    return this.#enqueue(async () => {
      this.#assertWritable("delete a checkpoint");
      const entry = this.#entries.find((e) => e.step === step);
      if (!entry) {
        throw new RangeError(
          `Cannot delete checkpoint: no committed checkpoint for step ${step} in ${this.#loc.where}`,
        );
      }
      const keep = this.#entries.filter((e) => e !== entry);
      await this.#putIndex(keep, `Cannot delete checkpoint step ${step} in ${this.#loc.where}`);
      this.#entries = keep;
      await this.#removeFiles([entry]);
    });
  }

  /**
   * Waits for pending saves, then releases the lock. Rejects like `flush()` when a save failed,
   * after releasing the lock. Calling it again does nothing.
   *
   * @example
   * ```ts
   * import { CheckpointManager } from "./mod.ts";
   * const dir = await Deno.makeTempDir();
   * const manager = await CheckpointManager.open(dir);
   * await manager.close();
   * await (await CheckpointManager.open(dir)).close(); // the lock is free again
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.flush();
    } finally {
      this.#closed = true;
      await this.#lock?.release();
      this.#lock = undefined;
    }
  }

  /** Same as `close()`, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Takes a damaged entry out of the index and, in a local directory, renames its file (the
   * manifest, for an incremental one) to `.NAME.damaged`, which no cleanup removes. Resolves with
   * the new path, or `null` when there was nothing to rename. Blobs only it referenced are removed
   * by the next open's cleanup.
   */
  #quarantine(entry: StoredEntry): Promise<string | null> {
    return this.#enqueue(async () => {
      const keep = this.#entries.filter((e) => e.step !== entry.step);
      await this.#putIndex(keep, `Cannot quarantine damaged checkpoint step ${entry.step} in ${this.#loc.where}`);
      this.#entries = keep;
      // Only a local directory can rename; on a store the entry is just no longer committed (and
      // the next open's cleanup removes its object like any other uncommitted one).
      if (this.#loc.dir === undefined) return null;
      const from = this.#loc.name(entry.file);
      const to = this.#loc.name(`.${entry.file.replaceAll("/", "_")}.damaged`);
      try {
        await files.rename(from, to);
        return to;
      } catch (e) {
        if (!(e instanceof OsErrors.NotFound)) {
          this.#o.onWarning(`Cannot move damaged ${from} aside: ${(e as Error).message}`);
        }
        return null;
      }
    });
  }

  /** Runs `fn` after everything queued before it; at once (synchronously) when nothing is. */
  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const start = this.#pending === 0 ? fn() : this.#tail.then(fn);
    this.#pending++;
    const run = start.finally(() => this.#pending--);
    this.#tail = run.catch(() => {});
    return run;
  }

  #assertWritable(what: string): void {
    if (this.#closed) throw new TypeError(`Cannot ${what}: the manager of ${this.#loc.where} is closed`);
    if (this.#o.readOnly) throw new TypeError(`Cannot ${what}: the manager of ${this.#loc.where} was opened readOnly`);
    if (this.#fenced) throw this.#fenced;
  }

  #policy(): RetentionPolicy {
    return policyOf(this.#o);
  }

  /** The condition of the next index write: that it is still the one this manager last saw. */
  #indexMode(): PutMode {
    return this.#version === undefined ? "create" : { ifMatch: this.#version };
  }

  /**
   * Commits `entries` as the new index, replacing the one this manager last read or wrote and
   * nothing else. When another writer replaced it meanwhile, the manager is fenced: this and every
   * later save or delete throws a {@linkcode PreconditionFailedError} saying so.
   */
  async #putIndex(entries: readonly StoredEntry[], what: string): Promise<void> {
    try {
      const info = await writeIndex(this.#loc, entries, this.#policy(), this.#indexMode(), this.#writerId);
      this.#version = info.version;
    } catch (e) {
      if (e instanceof PreconditionFailedError) {
        this.#fenced = new PreconditionFailedError(
          this.#loc.name(INDEX_FILE),
          `another manager opened this checkpoint directory for writing or changed its index since this one read it, so ${
            what.replace(/^Cannot /, "this manager cannot ")
          } or save or delete anything more (nothing it committed is lost; open the directory again to continue)`,
          { cause: e },
        );
        throw this.#fenced;
      }
      // The entries are ours and valid; a TypeError here is the store refusing the object.
      if (e instanceof TypeError) {
        throw new Error(`${what}: the index could not be written: ${e.message}`, { cause: e });
      }
      throw ioError(`${what}: the index could not be written`, e);
    }
  }

  async #current(): Promise<StoredEntry[]> {
    if (this.#closed) throw new TypeError(`Cannot read checkpoints: the manager of ${this.#loc.where} is closed`);
    // A read-only view follows the writer: it re-reads the index, which is replaced atomically.
    if (this.#o.readOnly) {
      const read = await readIndex(this.#loc).catch((e) => {
        if (e instanceof SyntaxError) return undefined; // still damaged: the view rebuilt at open stands
        throw e;
      });
      if (read) {
        this.#entries = read.contents?.entries ?? [];
        this.#o.stored = read.contents?.retention;
      }
    }
    return this.#entries;
  }

  #public(e: StoredEntry): CheckpointEntry {
    return {
      step: e.step,
      path: this.#loc.name(e.file),
      kind: e.kind,
      bytes: e.bytes,
      bytesWritten: e.bytesWritten,
      sha256: e.sha256,
      savedAt: e.savedAt,
      metadata: structuredClone(e.metadata),
      tensorCount: e.tensorCount,
    };
  }

  #filtered(tensors: CheckpointInput["tensors"], counter: { n: number }): CheckpointInput["tensors"] {
    const groups = this.#o.groups;
    const keep = (t: TensorInput) => !groups || groups.has(t.group ?? "params");
    if (Array.isArray(tensors)) {
      const list = (tensors as TensorInput[]).filter(keep);
      counter.n = list.length;
      return list;
    }
    return (async function* () {
      for await (const t of iterate(tensors)) {
        if (!keep(t)) continue;
        counter.n++;
        yield t;
      }
    })();
  }

  async #save(checkpoint: CheckpointInput, shards: ResolvedShards | undefined): Promise<CheckpointEntry> {
    this.#assertWritable("save a checkpoint");
    checkCheckpointObject(checkpoint, "Cannot save checkpoint");
    validateMetadata(checkpoint.metadata);
    const step = checkpoint.metadata.step;
    this.#assertAbove(step);
    // Under the lock a step's file has one writer and keeps its plain name; on an object store
    // every save writes keys of its own, so a stale writer can never overwrite committed bytes.
    if (shards) {
      const name = shardedName(this.#o.pattern, step, shards.saveId);
      const entry = await this.#writeSharded(name, checkpoint, shards);
      await this.#commit(entry);
      return this.#public(entry);
    }
    const name = this.#lock ? this.#o.pattern.format(step) : this.#o.pattern.formatUnique(step, saveToken());
    const entry = this.#o.incremental
      ? await this.#writeIncremental(name, checkpoint)
      : await this.#writeFull(name, checkpoint);
    await this.#commit(entry);
    return this.#public(entry);
  }

  async #copy(source: CheckpointManager, step: number, pace?: () => Promise<void>): Promise<CheckpointEntry> {
    this.#assertWritable("copy a checkpoint");
    const from = (await source.#current()).find((e) => e.step === step);
    if (!from) {
      throw new RangeError(`Cannot copy checkpoint: no committed checkpoint for step ${step} in ${source.#loc.where}`);
    }
    const o = this.#o;
    const sameBytes = from.kind === "full" && !o.incremental && o.groups === undefined &&
      o.codec === source.#o.codec && o.compression === source.#o.compression;
    if (!sameBytes) return await this.#save(await source.#load(from), undefined);
    this.#assertAbove(step);
    const name = this.#lock ? o.pattern.format(step) : o.pattern.formatUnique(step, saveToken());
    let copied: boolean;
    try {
      const options = { sync: o.sync, limits: source.#o.limits, codecs: source.#o.codecs, pace };
      copied = await copyCommitted(source.#loc, from, this.#loc.store, name, options);
    } catch (e) {
      throw ioError(`Cannot copy checkpoint step ${step} from ${source.#loc.where} to ${this.#loc.name(name)}`, e);
    }
    // The index records the whole file's SHA-256 (rebuilt from the files): verified as a load does.
    if (!copied) return await this.#save(await source.#load(from), undefined);
    const entry: StoredEntry = {
      ...from,
      file: name,
      bytesWritten: from.bytes,
      savedAt: new Date().toISOString(),
      metadata: structuredClone(from.metadata),
    };
    await this.#commit(entry);
    return this.#public(entry);
  }

  /** Throws unless `step` is above every committed step. */
  #assertAbove(step: number): void {
    const last = this.#entries.at(-1);
    if (last && step <= last.step) {
      throw new RangeError(
        `Cannot save checkpoint step ${step} in ${this.#loc.where}: step ${last.step} is already committed and steps must increase (delete newer checkpoints first to go back)`,
      );
    }
  }

  async #writeFull(name: string, checkpoint: CheckpointInput): Promise<StoredEntry> {
    const path = this.#loc.name(name);
    const counter = { n: 0 };
    let tensors = this.#filtered(checkpoint.tensors, counter);
    if (this.#o.writer !== inProcessWriter && !Array.isArray(tensors)) {
      // A writer of its own (such as a worker) is given an array: collect the iterable first.
      const all: TensorInput[] = [];
      for await (const t of iterate(tensors as AsyncIterable<TensorInput>)) all.push(t);
      tensors = all;
    }
    const input = { metadata: checkpoint.metadata, tensors };
    // Awaited only when there is a file to recycle: otherwise the writer gets the save at once.
    const victim = this.#recyclable(checkpoint);
    const reuse = victim ? await this.#takeOut(victim, checkpoint.metadata.step) : undefined;
    const options = { codec: this.#o.codec, compression: this.#o.compression, sync: this.#o.sync };
    let result: SaveResult;
    try {
      if (this.#loc.dir !== undefined) {
        result = await this.#o.writer.save(
          path,
          input,
          reuse === undefined ? options : { ...options, reuse: this.#loc.name(reuse) },
        );
      } else if (this.#o.writer !== inProcessWriter) {
        // A writer of its own (a worker) opens the store from its address (checked at open).
        result = await this.#o.writer.save(objectAddress({ store: this.#loc.store, key: name })!, input, options);
      } else {
        result = await saveToStore(this.#loc.store, name, input, options);
      }
    } catch (e) {
      throw ioError(`Cannot save checkpoint step ${checkpoint.metadata.step} to ${path}`, e);
    } finally {
      // A writer or store that does not recycle leaves the object: it is out of the index, so delete it.
      if (reuse !== undefined) await this.#removeKeys([reuse]);
    }
    return {
      step: checkpoint.metadata.step,
      file: name,
      kind: "full",
      bytes: result.bytes,
      bytesWritten: result.bytes,
      sha256: result.digest,
      savedAt: new Date().toISOString(),
      metadata: structuredClone(checkpoint.metadata),
      tensorCount: counter.n,
    };
  }

  /**
   * A sharded save: the parts (all of them here, or part 0 while other processes write the
   * rest), then the manifest at `name`, which the caller then commits to the index. A failure
   * removes what this attempt wrote (a writer still writing leaves objects the next open removes).
   */
  async #writeSharded(name: string, checkpoint: CheckpointInput, shards: ResolvedShards): Promise<StoredEntry> {
    const step = checkpoint.metadata.step;
    const where = `Cannot save checkpoint step ${step} in ${this.#loc.where}`;
    if (this.#o.incremental) {
      throw new TypeError(
        `${where}: a sharded save cannot be incremental (open the manager without incremental to save sharded checkpoints)`,
      );
    }
    if (this.#o.codec !== "binary" || this.#o.compression !== "none") {
      throw new TypeError(
        `${where}: the parts of a sharded save are uncompressed binary files (codec "binary", compression "none")`,
      );
    }
    if (shards.external && this.#o.groups) {
      throw new TypeError(
        `${where}: groups filter this process's tensors only; other writers would plan over different ones`,
      );
    }
    const at = { store: this.#loc.store, key: name };
    const counter = { n: 0 };
    const tensors = await tensorArray(this.#filtered(checkpoint.tensors, counter));
    const common = {
      saveId: shards.saveId,
      sync: this.#o.sync,
      ...(shards.splitBytes === undefined ? {} : { splitBytes: shards.splitBytes }),
    };
    let digest: string, parts: number;
    try {
      if (shards.external) {
        const done = await saveShard(at, { metadata: checkpoint.metadata, tensors }, {
          ...common,
          writer: 0,
          writers: shards.writers,
          commit: true,
          ...(shards.deadline === undefined ? {} : { deadline: shards.deadline }),
          ...(shards.poll === undefined ? {} : { poll: shards.poll }),
        });
        digest = done.digest!;
        parts = done.manifest!.parts.reduce((n, p) => n + p.bytes, 0);
      } else {
        const done = await saveSharded(at, { metadata: checkpoint.metadata, tensors }, {
          ...common,
          writers: shards.writers,
        });
        digest = done.digest;
        parts = done.manifest.parts.reduce((n, p) => n + p.bytes, 0);
      }
    } catch (e) {
      if (this.#lock) await removeShardLeftovers(at).catch(() => {});
      // ShardDeadlineError and ShardConflictError name the checkpoint and what failed: kept as they are.
      throw e;
    }
    const bytes = (await this.#loc.size(name) ?? 0) + parts;
    return {
      step,
      file: name,
      kind: "sharded",
      bytes,
      bytesWritten: bytes,
      sha256: digest,
      savedAt: new Date().toISOString(),
      metadata: structuredClone(checkpoint.metadata),
      tensorCount: counter.n,
    };
  }

  async #writeIncremental(name: string, checkpoint: CheckpointInput): Promise<StoredEntry> {
    const step = checkpoint.metadata.step;
    const gzip = this.#o.compression === "gzip";
    const known = new Map<string, number>();
    for (const e of this.#entries) for (const [k, size] of e.blobs ?? []) known.set(k, size);
    const created: string[] = [];
    const touched = new Set<string>(); // blob shard directories this save wrote into
    const blobs = new Map<string, number>();
    const tensors: ManifestTensor[] = [];
    const names = new Set<string>();
    let written = 0;
    try {
      for await (const t of this.#filtered(checkpoint.tensors, { n: 0 })) {
        validateTensor(t);
        if (names.has(t.name)) {
          throw new TypeError(`Invalid checkpoint: tensor name ${JSON.stringify(t.name)} appears twice`);
        }
        names.add(t.name);
        const key = digestOf(t) + (gzip ? ".gz" : "");
        let size = blobs.get(key) ?? known.get(key);
        if (size !== undefined && !blobs.has(key)) {
          // Reuse a stored blob only if it is still there with its size; otherwise write it again.
          if ((await this.#loc.size(blobKey(key))) !== size) size = undefined;
        }
        if (size === undefined) {
          touched.add(key.slice(0, 2));
          try {
            size = await writeBlob(this.#loc, key, bytesOf(t.data), { gzip, sync: this.#o.sync });
          } catch (e) {
            throw ioError(
              `Cannot save checkpoint step ${step}: writing the blob of tensor ${JSON.stringify(t.name)} failed`,
              e,
            );
          }
          created.push(key);
          written += size;
        }
        blobs.set(key, size);
        tensors.push({
          name: t.name,
          dtype: t.dtype,
          shape: [...t.shape],
          group: t.group ?? "params",
          bytes: t.data.byteLength,
          blob: key,
        });
      }
      const manifest = encodeManifest(checkpoint.metadata, tensors);
      const file = name + MANIFEST_SUFFIX;
      try {
        await this.#loc.write(file, manifest.bytes, this.#o.sync);
      } catch (e) {
        throw ioError(`Cannot save checkpoint step ${step}: writing its manifest ${this.#loc.name(file)} failed`, e);
      }
      let total = manifest.bytes.byteLength;
      for (const size of blobs.values()) total += size;
      return {
        step,
        file,
        kind: "incremental",
        bytes: total,
        bytesWritten: written + manifest.bytes.byteLength,
        sha256: manifest.sha256,
        savedAt: new Date().toISOString(),
        metadata: structuredClone(checkpoint.metadata),
        tensorCount: tensors.length,
        blobs,
      };
    } catch (e) {
      // Under the lock nobody else can have referenced the blobs this save wrote. Without it (an
      // object store) another writer may have written and committed the same blob meanwhile:
      // they are left for the next open to remove if unreferenced.
      if (this.#lock) {
        await this.#removeKeys(created.map(blobKey));
        // Shard directories this save created are empty again; a non-empty one is not removed.
        for (const shard of touched) {
          await files.remove(this.#loc.name(`${BLOBS_DIR}/${shard}`)).catch(() => {});
        }
      }
      throw e;
    }
  }

  /**
   * Page reuse: the full checkpoint whose file retention will delete once `checkpoint` is
   * committed, for the save to recycle; never the newest (until the new checkpoint commits, it
   * is what a crash resumes from). Undefined when there is none.
   */
  #recyclable(checkpoint: CheckpointInput): StoredEntry | undefined {
    // Only a local directory recycles; an object store would rewrite its index for nothing.
    if (!this.#o.recycle || this.#loc.dir === undefined) return undefined;
    const all = [...this.#entries, { step: checkpoint.metadata.step, metadata: checkpoint.metadata }];
    const reasons = retention(all, this.#policy());
    return this.#entries.slice(0, -1).find((e) => e.kind === "full" && reasons.get(e.step)!.length === 0);
  }

  /** Takes `victim` out of the index (so a crash never leaves the index naming a file being overwritten); its key. */
  async #takeOut(victim: StoredEntry, step: number): Promise<string> {
    const remaining = this.#entries.filter((e) => e !== victim);
    await this.#putIndex(remaining, `Cannot save checkpoint step ${step} in ${this.#loc.where}`);
    this.#entries = remaining;
    return victim.file;
  }

  /** Adds an entry to the index (the commit point), then applies retention. */
  async #commit(entry: StoredEntry): Promise<void> {
    const all = [...this.#entries, entry];
    const reasons = retention(all, this.#policy());
    const keep = all.filter((e) => reasons.get(e.step)!.length > 0);
    const drop = all.filter((e) => reasons.get(e.step)!.length === 0);
    try {
      await this.#putIndex(keep, `Cannot save checkpoint step ${entry.step} in ${this.#loc.where}`);
    } catch (e) {
      // Not committed: take the new files away again so nothing half-done is left behind (on an
      // object store only the save's own uniquely named file; see #writeIncremental for blobs).
      if (this.#lock) await this.#removeFiles([entry], this.#entries).catch(() => {});
      else if (entry.kind === "sharded") await deleteShardedCheckpoint(this.#at(entry)).catch(() => {});
      else await this.#removeKeys([entry.file]);
      throw e;
    }
    this.#entries = keep;
    await this.#removeFiles(drop);
  }

  /** Deletes objects, ignoring failures (what is left is removed at the next open). */
  async #removeKeys(keys: readonly string[]): Promise<void> {
    for (const key of keys) await this.#loc.store.delete(key).catch(() => {});
  }

  /**
   * Removes the files of entries that are no longer committed, and the blobs that no entry of
   * `remaining` references. Failures are warnings: the entries are already out of the index, and
   * the next open removes what is left. On an object store, nothing is removed once another
   * writer has replaced the index: what is unreferenced is then for that writer to judge.
   */
  async #removeFiles(gone: readonly StoredEntry[], remaining: readonly StoredEntry[] = this.#entries): Promise<void> {
    if (gone.length === 0) return;
    if (!this.#lock && (await this.#loc.store.head(INDEX_FILE).catch(() => undefined))?.version !== this.#version) {
      return;
    }
    const referenced = new Set<string>();
    for (const e of remaining) for (const k of e.blobs?.keys() ?? []) referenced.add(k);
    for (const e of gone) {
      if (e.kind === "sharded") {
        // The manifest first, then its parts: a crash part way leaves leftovers, never a half checkpoint.
        await deleteShardedCheckpoint(this.#at(e)).catch((err) =>
          this.#o.onWarning(
            `Cannot remove ${this.#loc.name(e.file)} of deleted checkpoint step ${e.step}: ${(err as Error).message}`,
          )
        );
        continue;
      }
      const keys = [e.file];
      for (const k of e.blobs?.keys() ?? []) if (!referenced.has(k)) keys.push(blobKey(k));
      for (const key of keys) {
        await this.#loc.store.delete(key).catch((err) =>
          this.#o.onWarning(
            `Cannot remove ${this.#loc.name(key)} of deleted checkpoint step ${e.step}: ${(err as Error).message}`,
          )
        );
      }
    }
  }

  /** A checkpoint's object in the manager's store. */
  #at(entry: StoredEntry): { store: ObjectStore; key: string } {
    return { store: this.#loc.store, key: entry.file };
  }

  async #load(entry: StoredEntry): Promise<Checkpoint> {
    const path = this.#loc.name(entry.file);
    let checkpoint: Checkpoint;
    if (entry.kind === "sharded") {
      // Every slice of every part is read and checked against the digest the manifest pins, and
      // the manifest against the index's digest.
      checkpoint = await loadCheckpoint(this.#at(entry), { sha256: entry.sha256 }).catch((e) => {
        if (e instanceof ObjectNotFoundError) throw notFound(`${e.message} (of ${path})`, { cause: e });
        throw e;
      });
    } else if (entry.kind === "incremental") {
      const got = await this.#loc.read(entry.file, MAX_MANIFEST_BYTES, "checkpoint manifest");
      if (got === undefined) throw notFound(`its manifest ${path} is missing`);
      const actual = sha256().update(got.bytes).digest("hex");
      if (actual !== entry.sha256) throw new ChecksumMismatchError(`manifest ${path}`, entry.sha256, actual);
      checkpoint = await readIncremental(this.#loc, decodeManifest(got.bytes, path, this.#o.limits));
    } else {
      const options = {
        ...this.#o.limits,
        codecs: this.#o.codecs,
        ...(this.#o.verify ? { sha256: entry.sha256 } : {}),
      };
      if (this.#loc.dir !== undefined) {
        try {
          await files.lstat(path);
        } catch (e) {
          if (e instanceof OsErrors.NotFound) throw new OsErrors.NotFound(`its file ${path} is missing`);
          throw e;
        }
        checkpoint = await loadCheckpoint(path, options);
      } else {
        const got = await this.#loc.store.get(entry.file).catch((e) => {
          if (isDamage(e)) throw notFound(`its file ${path} is missing`, { cause: e });
          throw e;
        });
        checkpoint = await loadCheckpoint(got.body, options);
      }
    }
    if (checkpoint.metadata.step !== entry.step) {
      throw new SyntaxError(
        `Cannot load checkpoint ${path}: it holds step ${checkpoint.metadata.step}, the index says ${entry.step}`,
      );
    }
    return checkpoint;
  }

  /** The tensor list of a checkpoint without its data; throws when its files are missing or damaged. */
  async #describe(e: StoredEntry): Promise<TensorSummary[] | undefined> {
    const loc = this.#loc;
    const path = loc.name(e.file);
    const size = await loc.size(e.file);
    if (size === undefined) throw notFound(`file ${path} is missing`);
    if (e.kind === "sharded") return await this.#describeSharded(e);
    if (e.kind === "incremental") {
      const got = await loc.read(e.file, MAX_MANIFEST_BYTES, "checkpoint manifest");
      if (got === undefined) throw notFound(`file ${path} is missing`);
      const actual = sha256().update(got.bytes).digest("hex");
      if (actual !== e.sha256) throw new ChecksumMismatchError(`manifest ${path}`, e.sha256, actual);
      const manifest = decodeManifest(got.bytes, path, this.#o.limits);
      for (const t of manifest.tensors) {
        const blob = loc.name(blobKey(t.blob));
        const blobSize = await loc.size(blobKey(t.blob));
        if (blobSize === undefined) {
          throw notFound(`blob ${blob} of tensor ${JSON.stringify(t.name)} is missing`);
        }
        if (blobSize !== e.blobs?.get(t.blob)) {
          throw new SyntaxError(`blob ${blob} has ${blobSize} bytes, the index says ${e.blobs?.get(t.blob)}`);
        }
      }
      return manifest.tensors.map(({ name, dtype, shape, group }) => ({ name, dtype, shape, group }));
    }
    if (size !== e.bytes) throw new SyntaxError(`file ${path} has ${size} bytes, the index says ${e.bytes}`);
    if (!(await startsWithBinary(loc, e.file))) return undefined;
    // The footer, index and metadata only: by seeking in a file, by range requests in a store.
    const index = await readCheckpointIndex(
      loc.dir !== undefined ? path : { store: loc.store, key: e.file },
      this.#o.limits,
    );
    if (index.metadata.step !== e.step) {
      throw new SyntaxError(`file ${path} holds step ${index.metadata.step}, the index says ${e.step}`);
    }
    return index.tensors.map(({ name, dtype, shape, group }) => ({ name, dtype, shape, group }));
  }

  /** A sharded checkpoint's tensors from its manifest, once every part it names is there with its size. */
  async #describeSharded(e: StoredEntry): Promise<TensorSummary[]> {
    const path = this.#loc.name(e.file);
    const { manifest, digest } = await readShardManifest(this.#at(e));
    if (digest !== e.sha256) throw new ChecksumMismatchError(`manifest ${path}`, e.sha256, digest);
    if (manifest.metadata.step !== e.step) {
      throw new SyntaxError(`manifest ${path} holds step ${manifest.metadata.step}, the index says ${e.step}`);
    }
    for (const p of manifest.parts) {
      const key = `${e.file}.parts/${manifest.saveId}/${p.name}`;
      const size = await this.#loc.size(key);
      if (size === undefined) throw notFound(`part ${this.#loc.name(key)} is missing`);
      if (size !== p.bytes) {
        throw new SyntaxError(`part ${this.#loc.name(key)} has ${size} bytes, the manifest says ${p.bytes}`);
      }
    }
    return manifest.tensors.map(({ name, dtype, shape, group }) => ({ name, dtype, shape: [...shape], group }));
  }

  /**
   * Removes what interrupted saves and deletions left: the store's own leftovers (temporary files,
   * incomplete multipart uploads, through `sweep`), checkpoint files the index does not list, and
   * blobs no committed checkpoint references. Under the lock every file named by the pattern
   * counts; on an object store only the uniquely named files the manager's own saves write, so
   * files put there by hand are left alone.
   */
  async #cleanUp(): Promise<void> {
    const loc = this.#loc;
    const pattern = this.#o.pattern;
    const committed = new Set(this.#entries.map((e) => e.file));
    const referenced = new Set<string>();
    for (const e of this.#entries) for (const k of e.blobs?.keys() ?? []) referenced.add(k);
    const removed: string[] = [];
    let swept = 0;
    // Under the lock the whole directory is the manager's. On a store, only the keys its saves
    // write: checkpoint objects start with the pattern's prefix (a file store's temporary files
    // with "." and it), blobs with "blobs/".
    const prefixes = this.#lock || pattern.prefix === ""
      ? [""]
      : [pattern.prefix, `.${pattern.prefix}`, `${BLOBS_DIR}/`];
    for (const prefix of prefixes) {
      try {
        swept += (await loc.store.sweep?.(prefix)) ?? 0;
      } catch (e) {
        this.#o.onWarning(`Cannot remove interrupted writes under ${loc.name(prefix)}: ${(e as Error).message}`);
      }
    }
    const isOurs = (name: string): boolean => {
      const base = name.endsWith(MANIFEST_SUFFIX) ? name.slice(0, -MANIFEST_SUFFIX.length) : name;
      return pattern.parseUnique(base) !== undefined || (this.#lock !== undefined && pattern.parse(base) !== undefined);
    };
    const leftovers: string[] = [];
    const sharded = new Set<string>(); // checkpoints with a parts directory: their leftovers go below
    for await (const f of loc.store.list("")) {
      const key = f.key;
      const slash = key.indexOf("/");
      if (slash < 0) {
        if (!committed.has(key) && isOurs(key)) leftovers.push(key);
        continue;
      }
      const parts = /^([^/]+)\.parts\//.exec(key);
      if (parts && isOurs(parts[1]!)) {
        sharded.add(parts[1]!);
        continue;
      }
      // blobs/XX/XX…: a blob of this store that no committed checkpoint references.
      const m = /^blobs\/([0-9a-f]{2})\/([^/]+)$/.exec(key);
      if (m && m[2]!.startsWith(m[1]!) && !referenced.has(m[2]!)) leftovers.push(key);
    }
    for (const key of leftovers) {
      try {
        await loc.store.delete(key);
        removed.push(key);
      } catch (e) {
        this.#o.onWarning(`Cannot remove leftover ${loc.name(key)}: ${(e as Error).message}`);
      }
    }
    // Parts and done records no committed manifest names: saves that never committed, or whose
    // manifest was removed above as uncommitted (kept are exactly those the committed manifest names).
    for (const name of sharded) {
      try {
        const n = await removeShardLeftovers({ store: loc.store, key: name });
        if (n > 0) removed.push(`${n} object(s) under ${loc.name(`${name}.parts`)}`);
      } catch (e) {
        this.#o.onWarning(`Cannot remove leftover parts under ${loc.name(`${name}.parts`)}: ${(e as Error).message}`);
      }
    }
    if (loc.dir !== undefined) {
      // Blob shard directories left empty go too.
      for (const shard of await readDirAll(loc.name(BLOBS_DIR)).catch(() => [])) {
        if (shard.isDirectory && /^[0-9a-f]{2}$/.test(shard.name)) {
          await files.remove(loc.name(`${BLOBS_DIR}/${shard.name}`)).catch(() => {});
        }
      }
    }
    const count = removed.length + swept;
    if (count > 0) {
      const named = removed.slice(0, 5);
      if (swept > 0) named.push(`${swept} temporary or incomplete upload(s)`);
      this.#o.onWarning(
        `Removed ${count} leftover file(s) of interrupted saves or deletions in ${loc.where}: ${named.join(", ")}${
          removed.length > 5 ? ", ..." : ""
        }`,
      );
    }
  }

  /** Warns about committed checkpoints whose file is missing or has the wrong size (cheap: no data read). */
  async #checkFiles(): Promise<void> {
    for (const e of this.#entries) {
      const path = this.#loc.name(e.file);
      const size = await this.#loc.size(e.file).catch(() => undefined);
      if (size === undefined) {
        this.#o.onWarning(`Checkpoint step ${e.step} in ${this.#loc.where} is damaged: its file ${path} is missing`);
      } else if (e.kind === "full" && size !== e.bytes) {
        this.#o.onWarning(
          `Checkpoint step ${e.step} in ${this.#loc.where} is damaged: its file ${path} has ${size} bytes, the index says ${e.bytes}`,
        );
      }
    }
  }
}
