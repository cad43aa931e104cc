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
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadCheckpoint } from "../io/load.ts";
import { readCheckpointIndex } from "../format/codecs/binary_file.ts";
import { bytesOf, validateTensor } from "../format/dtype.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import { validateMetadata } from "../format/metadata.ts";
import { type SaveResult, writeFileAtomic } from "../io/save.ts";
import type { Checkpoint, CheckpointInput, TensorInput } from "../format/types.ts";
import { sha256 } from "../format/_hash.ts";
import { SavePromise } from "../background/_protocol.ts";
import {
  blobPath,
  BLOBS_DIR,
  decodeManifest,
  digestOf,
  encodeManifest,
  type ManifestTensor,
  readIncremental,
  writeBlob,
} from "./_blobs.ts";
import type { CheckpointEntry, ListedCheckpoint, TensorSummary } from "./entry.ts";
import type { CheckpointManagerOptions } from "./options.ts";
import { ioError, isDamage } from "./_errors.ts";
import { readIndex, type StoredEntry, writeIndex } from "./_index.ts";
import { DirectoryLock } from "./_lock.ts";
import { isTemporaryName, MANIFEST_SUFFIX } from "./_pattern.ts";
import { adopt, startsWithBinary } from "./_recovery.ts";
import { inProcessWriter, policyOf, type Resolved, resolveOptions } from "./_resolve.ts";
import { bestSteps, retention, type RetentionPolicy } from "./_retention.ts";

export type { CheckpointEntry, ListedCheckpoint, TensorSummary } from "./entry.ts";
export {
  type BestPolicy,
  type CheckpointManagerOptions,
  type CheckpointWriter,
  DEFAULT_FILENAME,
  DEFAULT_MAX_TO_KEEP,
  INFERENCE_PRESET,
  TRAINING_PRESET,
} from "./options.ts";
export { DirectoryLockedError } from "./_lock.ts";
export type { KeepReason } from "./_retention.ts";

async function removeIfPresent(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
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
  #dir: string;
  #o: Resolved;
  #lock: DirectoryLock | undefined;
  #entries: StoredEntry[];
  #tail: Promise<unknown> = Promise.resolve();
  #pending = 0;
  #failures: { error: unknown; promise: SavePromise<CheckpointEntry> }[] = [];
  #closed = false;

  private constructor(dir: string, o: Resolved, lock: DirectoryLock | undefined, entries: StoredEntry[]) {
    this.#dir = dir;
    this.#o = o;
    this.#lock = lock;
    this.#entries = entries;
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
  static async open(dir: string | URL, options: CheckpointManagerOptions = {}): Promise<CheckpointManager> {
    if (dir instanceof URL) {
      if (dir.protocol !== "file:") {
        throw new TypeError(`Cannot open checkpoint directory ${dir.href}: only file: URLs`);
      }
      dir = fileURLToPath(dir);
    }
    if (typeof dir !== "string" || dir === "") throw new TypeError("Cannot open checkpoint directory: expected a path");
    const o = resolveOptions(options);
    const path = resolve(dir);
    if (!o.readOnly) {
      try {
        await Deno.mkdir(path, { recursive: true });
      } catch (e) {
        throw ioError(`Cannot create checkpoint directory ${path}`, e);
      }
    }
    const info = await Deno.stat(path).catch((e) => {
      throw ioError(`Cannot open checkpoint directory ${path}`, e);
    });
    if (!info.isDirectory) throw new TypeError(`Cannot open checkpoint directory ${path}: it is not a directory`);
    const lock = o.readOnly ? undefined : await DirectoryLock.acquire(path, o.onWarning);
    try {
      const index = await readIndex(path).catch((e) => {
        if (e instanceof SyntaxError && !o.readOnly) {
          o.onWarning(`${e.message}; rebuilding it from the checkpoint files in ${path}`);
          return undefined;
        }
        throw e;
      });
      if (o.readOnly) o.stored = index?.retention;
      const entries = index?.entries ?? (o.readOnly ? [] : await adopt(path, o));
      const manager = new CheckpointManager(path, o, lock, entries);
      if (!o.readOnly) await manager.#cleanUp();
      await manager.#checkFiles();
      return manager;
    } catch (e) {
      await lock?.release();
      throw e;
    }
  }

  /** The directory, as an absolute path. */
  get dir(): string {
    return this.#dir;
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
  save(checkpoint: CheckpointInput): Promise<CheckpointEntry> {
    const earlier = this.#takeUnreported();
    if (earlier) throw earlier;
    this.#assertWritable("save a checkpoint");
    const { promise, resolve, reject } = SavePromise.create<CheckpointEntry>();
    this.#enqueue(() => this.#save(checkpoint)).then(resolve, (e) => {
      this.#failures.push({ error: e, promise });
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
    const error = this.#takeUnreported();
    if (error) throw error;
  }

  /**
   * The newest committed checkpoint that loads and verifies. An entry whose files are missing or
   * fail their digests is skipped with a warning (through `onWarning`) in favour of the next
   * older one. Resolves with `undefined` when there is none.
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
   * assert.match(warnings[0]!, /Skipping checkpoint step 2/);
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
        this.#o.onWarning(
          `Skipping checkpoint step ${entry.step} in ${this.#dir}: ${(e as Error).message}${
            i > 0 ? "; falling back to an older one" : ""
          }`,
        );
      }
    }
    return undefined;
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
      if (!latest) throw new RangeError(`Cannot load checkpoint: ${this.#dir} holds no loadable checkpoint`);
      return latest;
    }
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new TypeError(`Cannot load checkpoint: step ${step} is not a non-negative integer`);
    }
    const entry = (await this.#current()).find((e) => e.step === step);
    if (!entry) {
      throw new RangeError(`Cannot load checkpoint: no committed checkpoint for step ${step} in ${this.#dir}`);
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
        listed.status = err instanceof Deno.errors.NotFound ? "missing" : "damaged";
        listed.problem = (err as Error).message;
      }
      if (listed.tensors === undefined) delete listed.tensors;
      out.push(listed);
    }
    return out;
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
        throw new RangeError(`Cannot delete checkpoint: no committed checkpoint for step ${step} in ${this.#dir}`);
      }
      const keep = this.#entries.filter((e) => e !== entry);
      try {
        await writeIndex(this.#dir, keep, this.#policy(), this.#o.sync);
      } catch (e) {
        throw ioError(`Cannot delete checkpoint step ${step} in ${this.#dir}: the index could not be written`, e);
      }
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

  /** Failures of saves whose promise nobody listened to, once: one error, or an `AggregateError`. */
  #takeUnreported(): unknown {
    const errors = this.#failures.filter((f) => !f.promise.observed).map((f) => f.error);
    this.#failures = [];
    if (errors.length === 0) return undefined;
    return errors.length === 1 ? errors[0] : new AggregateError(errors, `${errors.length} checkpoint saves failed`);
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
    if (this.#closed) throw new TypeError(`Cannot ${what}: the manager of ${this.#dir} is closed`);
    if (this.#o.readOnly) throw new TypeError(`Cannot ${what}: the manager of ${this.#dir} was opened readOnly`);
  }

  #policy(): RetentionPolicy {
    return policyOf(this.#o);
  }

  async #current(): Promise<StoredEntry[]> {
    if (this.#closed) throw new TypeError(`Cannot read checkpoints: the manager of ${this.#dir} is closed`);
    // A read-only view follows the writer: it re-reads the index, which is replaced atomically.
    if (this.#o.readOnly) {
      const index = await readIndex(this.#dir);
      this.#entries = index?.entries ?? [];
      this.#o.stored = index?.retention;
    }
    return this.#entries;
  }

  #public(e: StoredEntry): CheckpointEntry {
    return {
      step: e.step,
      path: join(this.#dir, e.file),
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
      for await (const t of tensors) {
        if (!keep(t)) continue;
        counter.n++;
        yield t;
      }
    })();
  }

  async #save(checkpoint: CheckpointInput): Promise<CheckpointEntry> {
    this.#assertWritable("save a checkpoint");
    if (typeof checkpoint !== "object" || checkpoint === null) {
      throw new TypeError("Cannot save checkpoint: expected { metadata, tensors }");
    }
    validateMetadata(checkpoint.metadata);
    const step = checkpoint.metadata.step;
    const last = this.#entries.at(-1);
    if (last && step <= last.step) {
      throw new RangeError(
        `Cannot save checkpoint step ${step} in ${this.#dir}: step ${last.step} is already committed and steps must increase (delete newer checkpoints first to go back)`,
      );
    }
    const name = this.#o.pattern.format(step);
    const entry = this.#o.incremental
      ? await this.#writeIncremental(name, checkpoint)
      : await this.#writeFull(name, checkpoint);
    await this.#commit(entry);
    return this.#public(entry);
  }

  async #writeFull(name: string, checkpoint: CheckpointInput): Promise<StoredEntry> {
    const path = join(this.#dir, name);
    const counter = { n: 0 };
    let tensors = this.#filtered(checkpoint.tensors, counter);
    if (this.#o.writer !== inProcessWriter && !Array.isArray(tensors)) {
      // A writer of its own (such as a worker) is given an array: collect the iterable first.
      tensors = await Array.fromAsync(tensors as AsyncIterable<TensorInput>);
    }
    const input = { metadata: checkpoint.metadata, tensors };
    // Awaited only when there is a file to recycle: otherwise the writer gets the save at once.
    const victim = this.#recyclable(checkpoint);
    const reuse = victim ? await this.#takeOut(victim, checkpoint.metadata.step) : undefined;
    let result: SaveResult;
    try {
      result = await this.#o.writer.save(path, input, {
        codec: this.#o.codec,
        compression: this.#o.compression,
        sync: this.#o.sync,
        ...(reuse === undefined ? {} : { reuse }),
      });
    } catch (e) {
      throw ioError(`Cannot save checkpoint step ${checkpoint.metadata.step} to ${path}`, e);
    } finally {
      // A writer that does not recycle leaves the file: it is out of the index, so delete it.
      if (reuse !== undefined) await removeIfPresent(reuse).catch(() => {});
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
          const onDisk = (await Deno.stat(blobPath(this.#dir, key)).catch(() => undefined))?.size;
          if (onDisk !== size) size = undefined;
        }
        if (size === undefined) {
          touched.add(key.slice(0, 2));
          try {
            size = await writeBlob(this.#dir, key, bytesOf(t.data), { gzip, sync: this.#o.sync });
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
        await writeFileAtomic(join(this.#dir, file), async (f) => {
          let off = 0;
          while (off < manifest.bytes.byteLength) off += await f.write(manifest.bytes.subarray(off));
        }, { sync: this.#o.sync });
      } catch (e) {
        throw ioError(`Cannot save checkpoint step ${step}: writing its manifest ${join(this.#dir, file)} failed`, e);
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
      for (const key of created) await removeIfPresent(blobPath(this.#dir, key)).catch(() => {});
      // Shard directories this save created are empty again; a non-empty one is not removed.
      for (const shard of touched) {
        await Deno.remove(join(this.#dir, BLOBS_DIR, shard)).catch(() => {});
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
    if (!this.#o.recycle) return undefined;
    const all = [...this.#entries, { step: checkpoint.metadata.step, metadata: checkpoint.metadata }];
    const reasons = retention(all, this.#policy());
    return this.#entries.slice(0, -1).find((e) => e.kind === "full" && reasons.get(e.step)!.length === 0);
  }

  /** Takes `victim` out of the index (so a crash never leaves the index naming a file being overwritten); its path. */
  async #takeOut(victim: StoredEntry, step: number): Promise<string> {
    const remaining = this.#entries.filter((e) => e !== victim);
    try {
      await writeIndex(this.#dir, remaining, this.#policy(), this.#o.sync);
    } catch (e) {
      throw ioError(`Cannot save checkpoint step ${step} in ${this.#dir}: the index could not be written`, e);
    }
    this.#entries = remaining;
    return join(this.#dir, victim.file);
  }

  /** Adds an entry to the index (the commit point), then applies retention. */
  async #commit(entry: StoredEntry): Promise<void> {
    const all = [...this.#entries, entry];
    const reasons = retention(all, this.#policy());
    const keep = all.filter((e) => reasons.get(e.step)!.length > 0);
    const drop = all.filter((e) => reasons.get(e.step)!.length === 0);
    try {
      await writeIndex(this.#dir, keep, this.#policy(), this.#o.sync);
    } catch (e) {
      // Not committed: take the new files away again so nothing half-done is left behind.
      await this.#removeFiles([entry], this.#entries).catch(() => {});
      throw ioError(`Cannot save checkpoint step ${entry.step} in ${this.#dir}: the index could not be written`, e);
    }
    this.#entries = keep;
    await this.#removeFiles(drop);
  }

  /**
   * Removes the files of entries that are no longer committed, and the blobs that no entry of
   * `remaining` references. Failures are warnings: the entries are already out of the index, and
   * the next open removes what is left.
   */
  async #removeFiles(gone: readonly StoredEntry[], remaining: readonly StoredEntry[] = this.#entries): Promise<void> {
    const referenced = new Set<string>();
    for (const e of remaining) for (const k of e.blobs?.keys() ?? []) referenced.add(k);
    for (const e of gone) {
      const paths = [join(this.#dir, e.file)];
      for (const k of e.blobs?.keys() ?? []) if (!referenced.has(k)) paths.push(blobPath(this.#dir, k));
      for (const p of paths) {
        await removeIfPresent(p).catch((err) =>
          this.#o.onWarning(`Cannot remove ${p} of deleted checkpoint step ${e.step}: ${(err as Error).message}`)
        );
      }
    }
  }

  async #load(entry: StoredEntry): Promise<Checkpoint> {
    const path = join(this.#dir, entry.file);
    let checkpoint: Checkpoint;
    if (entry.kind === "incremental") {
      const bytes = await Deno.readFile(path).catch((e) => {
        if (e instanceof Deno.errors.NotFound) throw new Deno.errors.NotFound(`its manifest ${path} is missing`);
        throw e;
      });
      const actual = sha256().update(bytes).digest("hex");
      if (actual !== entry.sha256) throw new ChecksumMismatchError(`manifest ${path}`, entry.sha256, actual);
      checkpoint = await readIncremental(this.#dir, decodeManifest(bytes, path, this.#o.limits));
    } else {
      try {
        await Deno.lstat(path);
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) throw new Deno.errors.NotFound(`its file ${path} is missing`);
        throw e;
      }
      checkpoint = await loadCheckpoint(path, {
        ...this.#o.limits,
        codecs: this.#o.codecs,
        ...(this.#o.verify ? { sha256: entry.sha256 } : {}),
      });
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
    const path = join(this.#dir, e.file);
    const stat = await Deno.stat(path);
    if (e.kind === "incremental") {
      const bytes = await Deno.readFile(path);
      const actual = sha256().update(bytes).digest("hex");
      if (actual !== e.sha256) throw new ChecksumMismatchError(`manifest ${path}`, e.sha256, actual);
      const manifest = decodeManifest(bytes, path, this.#o.limits);
      for (const t of manifest.tensors) {
        const blob = blobPath(this.#dir, t.blob);
        const size = (await Deno.stat(blob).catch(() => undefined))?.size;
        if (size === undefined) {
          throw new Deno.errors.NotFound(`blob ${blob} of tensor ${JSON.stringify(t.name)} is missing`);
        }
        if (size !== e.blobs?.get(t.blob)) {
          throw new SyntaxError(`blob ${blob} has ${size} bytes, the index says ${e.blobs?.get(t.blob)}`);
        }
      }
      return manifest.tensors.map(({ name, dtype, shape, group }) => ({ name, dtype, shape, group }));
    }
    if (stat.size !== e.bytes) throw new SyntaxError(`file ${path} has ${stat.size} bytes, the index says ${e.bytes}`);
    const isBinary = await startsWithBinary(path);
    if (!isBinary) return undefined;
    const index = await readCheckpointIndex(path, this.#o.limits);
    if (index.metadata.step !== e.step) {
      throw new SyntaxError(`file ${path} holds step ${index.metadata.step}, the index says ${e.step}`);
    }
    return index.tensors.map(({ name, dtype, shape, group }) => ({ name, dtype, shape, group }));
  }

  /** Removes temporary files and uncommitted or deleted checkpoint files and blobs. */
  async #cleanUp(): Promise<void> {
    const committed = new Set(this.#entries.map((e) => e.file));
    const referenced = new Set<string>();
    for (const e of this.#entries) for (const k of e.blobs?.keys() ?? []) referenced.add(k);
    const removed: string[] = [];
    const remove = async (path: string, label: string) => {
      try {
        await Deno.remove(path);
        removed.push(label);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) {
          this.#o.onWarning(`Cannot remove leftover ${path}: ${(e as Error).message}`);
        }
      }
    };
    for await (const f of Deno.readDir(this.#dir)) {
      if (!f.isFile) continue;
      const uncommitted = !committed.has(f.name) && (
        this.#o.pattern.parse(f.name) !== undefined ||
        (f.name.endsWith(MANIFEST_SUFFIX) &&
          this.#o.pattern.parse(f.name.slice(0, -MANIFEST_SUFFIX.length)) !== undefined)
      );
      if (isTemporaryName(f.name) || uncommitted) await remove(join(this.#dir, f.name), f.name);
    }
    const blobsDir = join(this.#dir, BLOBS_DIR);
    const shards = await Array.fromAsync(Deno.readDir(blobsDir)).catch(() => []);
    for (const shard of shards) {
      if (!shard.isDirectory || !/^[0-9a-f]{2}$/.test(shard.name)) continue;
      const shardDir = join(blobsDir, shard.name);
      let left = 0;
      for await (const f of Deno.readDir(shardDir)) {
        if (f.isFile && (isTemporaryName(f.name) || (!referenced.has(f.name) && f.name.startsWith(shard.name)))) {
          await remove(join(shardDir, f.name), `${BLOBS_DIR}/${shard.name}/${f.name}`);
        } else left++;
      }
      if (left === 0) await Deno.remove(shardDir).catch(() => {});
    }
    if (removed.length > 0) {
      this.#o.onWarning(
        `Removed ${removed.length} leftover file(s) of interrupted saves or deletions in ${this.#dir}: ${
          removed.slice(0, 5).join(", ")
        }${removed.length > 5 ? ", ..." : ""}`,
      );
    }
  }

  /** Warns about committed checkpoints whose file is missing or has the wrong size (cheap: no data read). */
  async #checkFiles(): Promise<void> {
    for (const e of this.#entries) {
      const path = join(this.#dir, e.file);
      const size = (await Deno.stat(path).catch(() => undefined))?.size;
      if (size === undefined) {
        this.#o.onWarning(`Checkpoint step ${e.step} in ${this.#dir} is damaged: its file ${path} is missing`);
      } else if (e.kind === "full" && size !== e.bytes) {
        this.#o.onWarning(
          `Checkpoint step ${e.step} in ${this.#dir} is damaged: its file ${path} has ${size} bytes, the index says ${e.bytes}`,
        );
      }
    }
  }
}
