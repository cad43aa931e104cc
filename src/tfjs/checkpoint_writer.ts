/**
 * Snapshot a tfjs model and save it in the background, reusing staging memory.
 *
 * @module
 */
import { checkOptionNames, optionNames } from "../format/_options.ts";
import {
  BackgroundWriter,
  DEFAULT_IDLE_TIMEOUT,
  DEFAULT_WHEN_BUSY,
  SupersededError,
  type WhenBusy,
  type WriterPriority,
} from "../background/writer.ts";
import type { SaveOptions, SaveResult } from "../io/save.ts";
import type { Checkpoint, CheckpointInput, Tensor as CheckpointTensor } from "../format/types.ts";
import type { CheckpointEntry } from "../manager/mod.ts";
import { SAVE_STREAM, SavePromise } from "../background/_protocol.ts";
import { SaveLedger } from "../background/_saves.ts";
import { holdSnapshot, type SnapshotOptions } from "./snapshot.ts";
import { StagingPool } from "./staging_pool.ts";
import { isStoreObject, type StoreObject } from "../storage/resolve.ts";

/** Options for {@linkcode CheckpointWriter}. */
export interface CheckpointWriterOptions {
  /**
   * What a save does while another is being written: queue (`"wait"`, every checkpoint is
   * written in call order) or replace the one still waiting (`"coalesce"`, whose promise then
   * rejects with `SupersededError`; the one being written always completes).
   *
   * @default {"wait"}
   */
  whenBusy?: WhenBusy;
  /**
   * Codec (`"binary"` or `"json"`), compression and sync for every save; a save's own options
   * override them.
   *
   * @default {{}} (binary, uncompressed, synced to disk)
   */
  saveOptions?: SaveOptions;
  /**
   * Staging memory for snapshots. Buffers come back from the worker after each save and are
   * reused by the next snapshot of the same size.
   *
   * @default {new StagingPool()}
   */
  staging?: StagingPool;
  /**
   * Milliseconds the background worker is kept once idle.
   *
   * @default {1000}
   */
  idleTimeout?: number;
  /**
   * The worker's scheduling priority (see `BackgroundWriterOptions.priority`): `"background"`
   * runs the save's encoding, hashing and writing below the training loop's priority, so a loop
   * that keeps the cores busy is slowed less and the save takes longer; `"normal"` leaves it.
   *
   * @default {"background"}
   */
  priority?: WriterPriority;
}

/**
 * Tensors read back are moved to the worker in batches of at least this many bytes: with one
 * message a tensor, an unawaited save's training steps took 3-16 ms longer in 5 of 6 alternating
 * runs (54 MiB of tfjs-node state in 4.5 MiB tensors, 2 cores); with 16 MiB batches they did not.
 */
const STREAM_BATCH_BYTES = 16 * 2 ** 20;

const WRITER_OPTION_NAMES = optionNames<CheckpointWriterOptions>()([
  "whenBusy",
  "saveOptions",
  "staging",
  "idleTimeout",
  "priority",
]);

/** What {@linkcode CheckpointWriter.save} needs of a `CheckpointManager`: its `save(checkpoint)`. */
export interface ManagerLike {
  /** Commits a checkpoint and resolves with its entry. */
  save(checkpoint: CheckpointInput): Promise<CheckpointEntry>;
}

/** What a `CheckpointManager` takes as its `writer` option: an atomic file writer. */
export interface FileWriter {
  /** Writes `checkpoint` to `path` atomically; resolves with the bytes written and their SHA-256. */
  save(path: string, checkpoint: CheckpointInput, options: SaveOptions): Promise<SaveResult>;
}

function isManager(target: unknown): target is ManagerLike {
  return typeof target === "object" && target !== null && !(target instanceof URL) && !isStoreObject(target) &&
    typeof (target as ManagerLike).save === "function";
}

/**
 * Takes snapshots of a tfjs model (and optimizer) and writes them from a Web Worker, so the
 * training loop pays only for starting the device read-back and moving one buffer: encoding,
 * SHA-256, gzip and file I/O happen off its thread.
 *
 * `save()` captures the state synchronously (see {@linkcode snapshot}): training steps may run
 * as soon as it returns, without awaiting it. Its promise settles when the file is written.
 * Saves are handed to the worker in call order, one written at a time; a save arriving while
 * one is written waits (the default) or replaces the one still waiting (`whenBusy:
 * "coalesce"`). Each snapshot is staged in one buffer that is moved to the worker without a
 * copy and comes back for the next snapshot, so periodic checkpoints of the same model do not
 * allocate it again.
 *
 * A save to a path (`whenBusy: "wait"`, no earlier save still being handed over) opens its file
 * in the worker at once and streams the snapshot to it: where the backend's read-back hands out a
 * copy (tensorflow, wasm), the tensors are moved to the worker as they are read (16 MiB at a
 * time), so the write of the first tensors overlaps the copy of the next. A read-back that fails
 * then aborts the file (the previous one is left as it was, and no temporary file) and the save
 * rejects with its error.
 *
 * With a `CheckpointManager` as the target, the snapshot is committed through the manager
 * (file naming, index, retention, resume with `latest()`); open the manager with
 * `writer: checkpointWriter.fileWriter` so that its files, too, are written in the worker and
 * the staging buffers come back. That works for a manager on a local directory and, in a
 * browser, on OPFS (`CheckpointManager.open("opfs:///runs/demo", { writer })`): the worker opens
 * the same OPFS directory itself. The manager's index is still written on the calling thread.
 *
 * Errors: bad arguments throw from `save()` at once. A save that fails (read-back or write)
 * rejects its promise; if nobody took charge of it (a rejection handler on the promise or on one
 * that `then(onSaved)` derived from it: `await`, `catch`, `then(f, g)`), the error is thrown by
 * the next `save()`, `flush()` or `close()` instead, so it is never lost. `.catch(() => {})`
 * silences a failure on purpose; `save(...).then(onSaved)` alone leaves failures to the writer.
 *
 * @example
 * ```ts
 * import * as tf from "@tensorflow/tfjs";
 * import { CheckpointWriter } from "./mod.ts";
 * import { loadCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * tf.enableProdMode(); // Deno only looks like Node.js: no "install tfjs-node" banner
 * await tf.setBackend("cpu");
 * const model = tf.sequential({ layers: [tf.layers.dense({ name: "writer_fc", units: 1, inputShape: [2] })] });
 * const optimizer = tf.train.sgd(0.1);
 * model.compile({ optimizer, loss: "meanSquaredError" });
 * const dir = await Deno.makeTempDir();
 *
 * const writer = new CheckpointWriter({ saveOptions: { compression: "gzip" } });
 * for (let step = 1; step <= 4; step++) {
 *   await model.trainOnBatch(tf.ones([2, 2]), tf.zeros([2, 1]));
 *   if (step % 2 === 0) writer.save(`${dir}/step-${step}.ckpt`, { model, optimizer, step }); // not awaited
 * }
 * await writer.close(); // waits for both, throws if one failed
 *
 * const back = await loadCheckpoint(`${dir}/step-4.ckpt`);
 * assert.equal(back.metadata.step, 4);
 * await Deno.remove(dir, { recursive: true });
 * model.dispose();
 * ```
 *
 * @example Through a checkpoint manager
 * ```ts
 * import * as tf from "@tensorflow/tfjs";
 * import { CheckpointWriter, restore } from "./mod.ts";
 * import { CheckpointManager } from "../manager/mod.ts";
 * import assert from "node:assert/strict";
 *
 * tf.enableProdMode(); // Deno only looks like Node.js: no "install tfjs-node" banner
 * await tf.setBackend("cpu");
 * const model = tf.sequential({ layers: [tf.layers.dense({ name: "managed_fc", units: 1, inputShape: [2] })] });
 * const dir = await Deno.makeTempDir();
 * const writer = new CheckpointWriter();
 * const manager = await CheckpointManager.open(dir, { maxToKeep: 2, writer: writer.fileWriter });
 * for (const step of [10, 20, 30]) writer.save(manager, { model, step });
 * await writer.close();
 * assert.deepEqual((await manager.list()).map((e) => e.step), [20, 30]);
 * const report = await restore((await manager.latest())!, { model });
 * assert.equal(report.loaded.length, 2);
 * await manager.close();
 * await Deno.remove(dir, { recursive: true });
 * model.dispose();
 * ```
 */
export class CheckpointWriter implements AsyncDisposable {
  #writer: BackgroundWriter;
  #pool: StagingPool;
  #saveOptions: SaveOptions;
  #handoff: Promise<void> = Promise.resolve();
  /** Saves whose snapshot is not yet handed over whole (the next save streams only when none is). */
  #handing = 0;
  #whenBusy: WhenBusy;
  #ledger = new SaveLedger("checkpoint saves");

  /**
   * Makes a writer; its worker starts with the first save.
   *
   * @param options See {@linkcode CheckpointWriterOptions}.
   */
  constructor(options: CheckpointWriterOptions = {}) {
    if (typeof options !== "object" || options === null) throw new TypeError("Invalid options: expected an object");
    checkOptionNames(options, WRITER_OPTION_NAMES, "Cannot make CheckpointWriter");
    const staging = options.staging ?? new StagingPool();
    if (!(staging instanceof StagingPool)) throw new TypeError("Invalid option staging: expected a StagingPool");
    const saveOptions = options.saveOptions ?? {};
    if (typeof saveOptions !== "object" || saveOptions === null) {
      throw new TypeError("Invalid option saveOptions: expected an object");
    }
    this.#pool = staging;
    this.#saveOptions = { ...saveOptions };
    this.#whenBusy = options.whenBusy ?? DEFAULT_WHEN_BUSY;
    this.#writer = new BackgroundWriter({
      whenBusy: options.whenBusy ?? DEFAULT_WHEN_BUSY,
      idleTimeout: options.idleTimeout ?? DEFAULT_IDLE_TIMEOUT,
      ...(options.priority === undefined ? {} : { priority: options.priority }),
      onReturn: (tensors) => this.#pool.release(tensors),
    });
  }

  /**
   * The background writer behind this one, shaped as a `CheckpointManager`'s `writer` option:
   * open a manager with it to have the manager's files written in the worker.
   */
  get fileWriter(): FileWriter {
    return this.#writer as FileWriter;
  }

  /** The staging pool snapshots are copied into (its `allocations` shows how often it grew). */
  get staging(): StagingPool {
    return this.#pool;
  }

  /** Saves requested and not yet settled. */
  get pending(): number {
    return this.#ledger.pending;
  }

  /** Whether {@linkcode CheckpointWriter.close} was called. */
  get closed(): boolean {
    return this.#ledger.closed;
  }

  /**
   * Snapshots `state` now and writes it to `target` (a path, or a `CheckpointManager` that
   * names, commits and prunes it) in the background. Returns at once; the promise settles when
   * the file is written (for a manager: committed). Training may continue without awaiting it.
   *
   * Throws at once, capturing nothing, when the writer is closed, when an earlier save failed
   * unobserved (that error), or when an argument is bad (see {@linkcode snapshot}).
   *
   * @param target Where to write: a path or a `file:` URL (written atomically), in a browser an
   *   `opfs:///dir/name.ckpt` URL (the worker writes it to the Origin Private File System), or a
   *   manager.
   * @param state The model, optimizer, step and metadata, as for {@linkcode snapshot}.
   * @param options For a path: codec (by name), compression and sync, over the writer's
   *   `saveOptions`. A manager uses its own.
   * @returns For a path, the bytes written and their SHA-256; for a manager, the committed entry.
   */
  save(target: ManagerLike, state: Omit<SnapshotOptions, "staging">): Promise<CheckpointEntry>;
  /**
   * Snapshots `state` now and writes it to the file `target` in the background, atomically.
   * See the overload above for the details.
   *
   * @param target A path or a `file:` URL, in a browser an `opfs:///dir/name.ckpt` URL, or
   *   `{ store, key }` of a store with an `address` (an `OpfsStore` from `OpfsStore.open`).
   * @param state The model, optimizer, step and metadata, as for {@linkcode snapshot}.
   * @param options Codec (by name), compression and sync, over the writer's `saveOptions`.
   * @returns The bytes written and their SHA-256.
   */
  save(
    target: string | URL | StoreObject,
    state: Omit<SnapshotOptions, "staging">,
    options?: SaveOptions,
  ): Promise<SaveResult>;
  save(
    target: string | URL | StoreObject | ManagerLike,
    state: Omit<SnapshotOptions, "staging">,
    options: SaveOptions = {},
  ): Promise<SaveResult | CheckpointEntry> {
    if (this.#ledger.closed) throw new Error("Cannot save checkpoint: the CheckpointWriter is closed");
    this.#ledger.throwUnreported();
    const manager = isManager(target) ? target : undefined;
    if (!manager && typeof target !== "string" && !(target instanceof URL) && !isStoreObject(target)) {
      throw new TypeError(
        "Cannot save checkpoint: target must be a path, a file: or opfs: URL, { store, key }, or a CheckpointManager",
      );
    }
    if (typeof state !== "object" || state === null) throw new TypeError("Cannot save checkpoint: state is required");
    const merged = { ...this.#saveOptions, ...options };
    let stream: ReturnType<BackgroundWriter[typeof SAVE_STREAM]> | undefined;
    let streamed = 0;
    let batch: CheckpointTensor[] = [];
    let batchBytes = 0;
    const taking = holdSnapshot({ ...state, staging: this.#pool }, (tensor) => {
      if (!stream) return;
      batch.push(tensor);
      batchBytes += tensor.data.byteLength;
      if (batchBytes < STREAM_BATCH_BYTES) return;
      stream.push(batch);
      streamed += batch.length;
      batch = [];
      batchBytes = 0;
    });
    const { promise, resolve, reject } = SavePromise.create<SaveResult | CheckpointEntry>();
    const fail = (e: unknown) => {
      if (!(e instanceof SupersededError)) this.#ledger.failed(e instanceof Error ? e : new Error(String(e)), promise);
      reject(e);
    };
    // To a path, with no save still being handed over before it (which keeps the call order):
    // the worker starts on the first tensors while the next are still being read back.
    if (!manager && this.#whenBusy === "wait" && this.#handing === 0) {
      try {
        stream = this.#writer[SAVE_STREAM](target as string | URL | StoreObject, taking.metadata, merged);
      } catch {
        // A bad target or option: handed over whole below, where it fails as it always did.
      }
    }
    if (stream) {
      const open = stream;
      this.#ledger.begin();
      this.#handing++;
      this.#handoff = (async () => {
        try {
          const checkpoint = await taking.done;
          if (streamed < checkpoint.tensors.length) open.push(checkpoint.tensors.slice(streamed));
          open.end();
        } catch (e) {
          open.end(e); // the worker removes what it wrote; the save rejects with e
        }
      })().finally(() => this.#handing--);
      open.promise.then(resolve, fail).finally(() => this.#ledger.end());
      return promise;
    }
    this.#ledger.begin();
    this.#handing++;
    const previous = this.#handoff;
    this.#handoff = (async () => {
      let checkpoint: Checkpoint;
      try {
        checkpoint = await taking.done;
      } catch (e) {
        await previous;
        fail(e);
        this.#ledger.end();
        return;
      }
      await previous; // hand saves over in call order
      let written: Promise<SaveResult | CheckpointEntry>;
      try {
        written = manager
          ? manager.save(checkpoint as CheckpointInput)
          : this.#writer.save(target as string | URL | StoreObject, checkpoint, merged);
      } catch (e) {
        this.#pool.release(checkpoint);
        fail(e);
        this.#ledger.end();
        return;
      }
      // Buffers moved to the worker come back through onReturn; those a manager wrote in this
      // thread are still here, and free once the save has settled.
      written.then(resolve, fail).finally(() => {
        this.#pool.release(checkpoint);
        this.#ledger.end();
      });
    })().finally(() => this.#handing--);
    return promise;
  }

  /**
   * Waits until every save has settled, then throws the first failure nobody listened to (an
   * `AggregateError` when there are several), once.
   */
  flush(): Promise<void> {
    return this.#ledger.flush();
  }

  /**
   * Stops taking saves, waits for those requested, stops the worker, and throws any failure
   * nobody listened to. Later calls return the same promise.
   */
  close(): Promise<void> {
    // Our failures are reported by the ledger; the background writer's are all observed by us.
    return this.#ledger.close(() => this.#writer.close().catch(() => {}));
  }

  /** Same as {@linkcode CheckpointWriter.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
