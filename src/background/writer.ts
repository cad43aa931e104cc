/**
 * Saving checkpoints off the training thread: a {@linkcode BackgroundWriter} moves a checkpoint's
 * tensor buffers to a Web Worker (transferred, not copied), where the core's `saveCheckpoint`
 * encodes, hashes, optionally gzips and atomically writes them, then hands the buffers back for
 * reuse. The thread that calls `save()` pays only for checking the tensors and moving buffers.
 *
 * @module
 */
import { checkCheckpointObject } from "../format/_checkpoint_input.ts";
import { checkOptionNames, optionNames } from "../format/_options.ts";
import { startWorker, type WorkerFailure, type WorkerHandle, type WorkerMessage } from "../runtime/workers.ts";
import { isAbsolute, resolve } from "node:path";
import { validateTensor } from "../format/dtype.ts";
import { validateMetadata } from "../format/metadata.ts";
import { type SaveOptions, type SaveResult, toPath } from "../io/save.ts";
import type { Metadata, TensorInput } from "../format/types.ts";
import {
  rebuildError,
  SAVE_STREAM,
  SavePromise,
  type SaveReply,
  type SaveRequest,
  serializeError,
  type TensorChunk,
  WORKER_URL,
  type WorkerSaveOptions,
  type WorkerSetup,
} from "./_protocol.ts";
import { type OwnedTensors, takeOwnership } from "./_transfer.ts";
import { SaveLedger } from "./_saves.ts";
import { WORKER_MODULE } from "./_worker_url.ts";
import { isStoreObject, objectAddress, resolveObject, type StoreObject } from "../storage/resolve.ts";

/**
 * What a {@linkcode BackgroundWriter} does with a `save()` that arrives while another is running:
 * - `"wait"`: it queues, and every save is written, in call order. Each queued save holds its
 *   tensors in memory until its turn.
 * - `"coalesce"`: it replaces the save that is still waiting (if any), whose promise then rejects
 *   with a {@linkcode SupersededError}; the running save always completes. At most two
 *   checkpoints are held: the one being written and the newest one.
 */
export type WhenBusy = "wait" | "coalesce";

/** The default of {@linkcode BackgroundWriterOptions.whenBusy}. */
export const DEFAULT_WHEN_BUSY: WhenBusy = "wait";

/**
 * The scheduling priority of a {@linkcode BackgroundWriter}'s worker:
 * - `"background"`: below the thread that calls `save()`, so the cores go to the training loop
 *   first and the save runs in what the loop leaves idle (Linux: the worker thread, and the
 *   threads it starts for writes and hashes, run at nice {@linkcode BACKGROUND_NICE}).
 * - `"normal"`: the priority of the process, as any thread.
 *
 * Applied where it can be (Linux; in Deno with the `sys` permission for `setPriority`), a no-op
 * elsewhere: see docs/background.md.
 *
 * @example
 * ```ts
 * import { BackgroundWriter, type WriterPriority } from "./writer.ts";
 * // A save that must finish as soon as possible, whatever it costs the training loop:
 * const priority: WriterPriority = "normal";
 * const writer = new BackgroundWriter({ priority });
 * await writer.close();
 * ```
 */
export type WriterPriority = "background" | "normal";

/**
 * The default of {@linkcode BackgroundWriterOptions.priority}.
 *
 * @example
 * ```ts
 * import { DEFAULT_PRIORITY } from "./writer.ts";
 * import assert from "node:assert/strict";
 * assert.equal(DEFAULT_PRIORITY, "background");
 * ```
 */
export const DEFAULT_PRIORITY: WriterPriority = "background";

/**
 * The nice value a `"background"` worker runs at (Linux; 0 is the default, 19 the lowest). On a
 * core the training loop keeps busy, a nice-10 thread gets about a tenth of it (the kernel's
 * weights: 110 against 1024), so a save still finishes when the loop never idles, in about ten
 * times its CPU time; at nice 19 (weight 15) it would take seventy times.
 *
 * @example
 * ```ts
 * import { BACKGROUND_NICE } from "./writer.ts";
 * import assert from "node:assert/strict";
 * assert.ok(BACKGROUND_NICE > 0 && BACKGROUND_NICE < 20);
 * ```
 */
export const BACKGROUND_NICE = 10;

/** The default of {@linkcode BackgroundWriterOptions.idleTimeout}, in milliseconds. */
export const DEFAULT_IDLE_TIMEOUT = 1000;

/** Options for {@linkcode BackgroundWriter}. */
export interface BackgroundWriterOptions {
  /**
   * What a `save()` does while another save is in flight: queue (`"wait"`) or replace the one
   * still waiting (`"coalesce"`). See {@linkcode WhenBusy}.
   *
   * @default {"wait"}
   */
  whenBusy?: WhenBusy;
  /**
   * Called with a save's tensors when the worker is done with them (saved, failed) or when the
   * save was superseded before it started, so their arrays can be reused as staging buffers for
   * the next snapshot. The tensors come in the order they were given; each `data` is a live
   * array (the buffer the caller gave, moved back, or the copy made of it: see
   * {@linkcode BackgroundWriter.save}). Called before the save's promise settles. Not called
   * when the worker crashed, since the buffers went down with it. If it throws, the error is
   * reported like a failed save.
   *
   * @default {undefined} (returned buffers are left to the garbage collector)
   */
  onReturn?: (tensors: TensorInput[]) => void;
  /**
   * Milliseconds the worker is kept once nothing is in flight or waiting; after that it is
   * terminated and the next save starts a new one. The constructor starts the first worker, so
   * the first save does not pay for it; a restart blocks the thread calling `save()` for about
   * 10 to 50 ms (measured on a busy 2-core VM). An idle worker keeps the process alive, so this
   * is also how long a script that never calls `close()` lingers after its last save (or after
   * the constructor, if it never saves). `Infinity` keeps the worker until `close()`: choose it
   * when checkpoints are further apart than the default, and call `close()`.
   *
   * @default {1000}
   */
  idleTimeout?: number;
  /**
   * The worker's scheduling priority: `"background"` lowers it below the calling thread's, so a
   * training loop that keeps the cores busy is slowed less by a save running beside it (the save
   * takes longer instead); `"normal"` leaves it. Applied on Linux, in Deno where the `sys`
   * permission for `setPriority` is granted (`--allow-sys`, `-A`) and in Node; elsewhere, or
   * where it cannot be applied, the worker runs at normal priority and saves as before. See
   * {@linkcode WriterPriority}.
   *
   * @default {"background"}
   */
  priority?: WriterPriority;
}

/** A checkpoint as {@linkcode BackgroundWriter.save} takes it: tensors as an array. */
export interface BackgroundCheckpoint {
  /** Metadata, copied when `save()` is called. */
  metadata: Metadata;
  /** The tensors; their buffers are taken over by `save()` (see there). */
  tensors: readonly TensorInput[];
}

/**
 * The rejection of a save that a newer one replaced before it started (only with
 * `whenBusy: "coalesce"`). Not a failure: it is never reported again by a later call.
 *
 * @example
 * ```ts
 * import { SupersededError } from "./writer.ts";
 * import assert from "node:assert/strict";
 * const e = new SupersededError({ path: "/c/a.ckpt", step: 10 }, { path: "/c/b.ckpt", step: 20 });
 * assert.equal(e.step, 10);
 * assert.equal(e.supersededByStep, 20);
 * assert.match(e.message, /superseded by step 20/);
 * ```
 */
export class SupersededError extends Error {
  /** The path the superseded save would have written. */
  readonly path: string;
  /** The step of the superseded checkpoint. */
  readonly step: number;
  /** The path of the save that replaced it. */
  readonly supersededByPath: string;
  /** The step of the checkpoint that replaced it. */
  readonly supersededByStep: number;

  /**
   * The rejection of `save`, replaced by `by` before it started.
   *
   * @param save The save that was replaced.
   * @param by The save that replaced it.
   */
  constructor(save: { path: string; step: number }, by: { path: string; step: number }) {
    super(
      `Cannot save checkpoint (step ${save.step}) to ${JSON.stringify(save.path)}: superseded by step ${by.step} to ${
        JSON.stringify(by.path)
      } before it started`,
    );
    this.name = "SupersededError";
    this.path = save.path;
    this.step = save.step;
    this.supersededByPath = by.path;
    this.supersededByStep = by.step;
  }
}

interface Job {
  step: number;
  path: string;
  /** "Cannot save checkpoint (step N) to PATH", the start of every error about this save. */
  context: string;
  promise: SavePromise<SaveResult>;
  resolve: (result: SaveResult) => void;
  reject: (error: unknown) => void;
  /** For a streamed save ended with an error: that error, which its promise rejects with. */
  streamError?: { error: unknown };
}

/** Where a save goes, as the worker is told: a path or address, and for `{ store, key }` the store's address. */
type Target = Pick<SaveRequest, "path" | "object">;

function checkTarget(target: string | URL | StoreObject): Target {
  if (isStoreObject(target)) {
    // The worker cannot be handed the store, only told where it is.
    const path = objectAddress(target);
    if (path === undefined) {
      throw new TypeError(
        `Cannot save checkpoint in the background to ${target.store.url}${target.key}: a worker cannot open that store (it has no address; an OpfsStore from OpfsStore.open and a FileStore have one)`,
      );
    }
    return { path, object: { store: target.store.address!, key: target.key } };
  }
  if (typeof target !== "string" && !(target instanceof URL)) {
    throw new TypeError(
      "Cannot save checkpoint in the background: target must be a path, a file: or opfs: URL, or { store, key }",
    );
  }
  const href = target instanceof URL ? target.href : target;
  // The Origin Private File System, which a page's worker opens as the page would.
  if (/^opfs:/i.test(href)) return { path: objectAddress(resolveObject(href))! }; // checked and normalised now
  const path = toPath(/^file:/i.test(href) ? new URL(href) : target);
  if (path.length === 0) throw new TypeError("Cannot save checkpoint in the background: target path is empty");
  // Resolved now: a later Deno.chdir must not change where a queued save goes.
  return { path: isAbsolute(path) ? path : resolve(path) };
}

/** What a background save takes of {@linkcode SaveOptions}; the others are refused by name. */
const WORKER_OPTION_NAMES = ["codec", "compression", "sync", "sha256sum", "reuse"] as const;
const WRITER_OPTION_NAMES = optionNames<BackgroundWriterOptions>()([
  "whenBusy",
  "idleTimeout",
  "onReturn",
  "priority",
]);
const SAVE_ONLY_HINTS: Readonly<Record<string, string>> = {
  preventClose: "a background save writes to a path, never to a stream of yours",
  storage: "a background save writes to a local path or an opfs: address",
  signal: "a background save cannot be aborted; await flush() or close()",
};

function checkOptions(options: SaveOptions): WorkerSaveOptions {
  checkOptionNames(options, WORKER_OPTION_NAMES, "Cannot save checkpoint in the background", SAVE_ONLY_HINTS);
  const { codec = "binary", compression = "none", sync = true, sha256sum = false, reuse } = options;
  if (codec !== "binary" && codec !== "json") {
    throw new TypeError(
      typeof codec === "string"
        ? `Unknown codec ${JSON.stringify(codec)}: use "binary" or "json"`
        : 'Cannot save checkpoint in the background with a Codec object: a worker can only be given a built-in codec by name ("binary" or "json")',
    );
  }
  if (compression !== "none" && compression !== "gzip" && compression !== "bytegroup") {
    throw new TypeError(`Unknown compression ${JSON.stringify(compression)}: use "none", "gzip" or "bytegroup"`);
  }
  if (typeof sync !== "boolean") throw new TypeError(`Invalid option sync: ${String(sync)}, expected a boolean`);
  if (typeof sha256sum !== "boolean") {
    throw new TypeError(`Invalid option sha256sum: ${String(sha256sum)}, expected a boolean`);
  }
  if (reuse !== undefined && typeof reuse !== "string") {
    throw new TypeError(`Invalid option reuse: ${String(reuse)}, expected a path`);
  }
  return reuse === undefined ? { codec, compression, sync, sha256sum } : { codec, compression, sync, sha256sum, reuse };
}

function checkTensors(tensors: unknown): readonly TensorInput[] {
  if (!Array.isArray(tensors)) {
    throw new TypeError(
      "Cannot save checkpoint in the background: tensors must be an array (an iterable or async iterable cannot be moved to a worker; collect it first)",
    );
  }
  const names = new Set<string>();
  for (const t of tensors as TensorInput[]) {
    const data = (t as Partial<TensorInput> | null)?.data;
    if (ArrayBuffer.isView(data) && data.buffer instanceof ArrayBuffer && data.buffer.detached) {
      throw new TypeError(
        `Cannot save checkpoint: tensor ${
          JSON.stringify(t.name)
        } has detached data (its buffer was moved by an earlier save; reuse the arrays given to onReturn)`,
      );
    }
    validateTensor(t);
    if (names.has(t.name)) {
      throw new TypeError(`Cannot save checkpoint: duplicate tensor name ${JSON.stringify(t.name)}`);
    }
    names.add(t.name);
  }
  return tensors;
}

/**
 * Saves checkpoints in a Web Worker, so the thread running training steps is not blocked by
 * encoding, SHA-256, gzip or file I/O. Each save runs the core's `saveCheckpoint` in the worker:
 * the file is written atomically, and a failed save leaves the previous file untouched.
 *
 * **Buffers.** `save()` takes the tensors' buffers over at once: a buffer that belongs wholly to
 * the checkpoint's tensors (one tensor owning its `ArrayBuffer`, or several tensors packed into
 * one buffer that they cover) is moved with no copy, and the caller's arrays become detached
 * (length 0). A tensor that views part of a larger buffer holding other data, or a
 * `SharedArrayBuffer`, is copied on the calling thread and the caller's array is left alone.
 * Either way, later writes by the caller cannot change what is saved. When the worker is done,
 * the buffers come back through {@linkcode BackgroundWriterOptions.onReturn}.
 *
 * **Ordering.** At most one save is in flight; saves run in call order. A save that arrives
 * while one is in flight waits (the default) or replaces the one still waiting
 * (`whenBusy: "coalesce"`; the replaced save's promise rejects with {@linkcode SupersededError}).
 * The queue lives in the worker, so queued saves start on time even while the calling thread is
 * busy.
 *
 * **The calling thread's event loop.** Promises settle, `onReturn` runs and `pending` goes down
 * only when the calling thread's event loop gets to the worker's replies. A training loop that
 * only awaits promises that are already settled (such as tfjs `trainOnBatch` on the cpu
 * backend) never lets it: the files are still written on time, but the buffers come back only
 * when the loop yields, e.g. `await new Promise((r) => setTimeout(r, 0))` once per step or before
 * each snapshot.
 *
 * **Errors.** A bad argument throws from `save()` at once (`TypeError`, `RangeError`). A save
 * that fails in the worker rejects its promise with an error of the worker's error class (such
 * as `Deno.errors.NotFound`) whose message names the step and path. A failure nobody took charge
 * of is thrown by the next `save()`, `flush()` or `close()`, so it is never lost; a failure you
 * took charge of is not reported twice. Taking charge means attaching a rejection handler to the
 * save's promise, or to a promise `then(onSaved)` or `finally` derived from it (`await`,
 * `catch`, `then(f, g)`, `Promise.all`), whatever that handler does: `.catch(() => {})` silences
 * a failure on purpose, while `save(...).then(onSaved)` alone leaves failures to the writer. A crashed
 * worker fails every save it held with an error saying so, and the next save starts a fresh
 * worker.
 *
 * **Lifetime.** `close()` waits for every save, reports any unreported failure, and terminates
 * the worker so it no longer keeps the process alive; after it, `save()` throws. `await using`
 * calls `close()` for you.
 *
 * @example
 * ```ts
 * import { BackgroundWriter } from "./writer.ts";
 * import { loadCheckpoint } from "../io/load.ts";
 * import type { TensorInput } from "../format/types.ts";
 * import assert from "node:assert/strict";
 *
 * const dir = await Deno.makeTempDir();
 * const spare: TensorInput[] = [];
 * const writer = new BackgroundWriter({ onReturn: (tensors) => spare.push(...tensors) });
 * const kernel = new Float32Array([1, 2, 3, 4]);
 * const saving = writer.save(`${dir}/step-10.ckpt`, {
 *   metadata: { step: 10, metrics: { loss: 0.5 } },
 *   tensors: [{ name: "dense/kernel", dtype: "float32", shape: [2, 2], data: kernel }],
 * }, { compression: "gzip" });
 * assert.equal(kernel.length, 0); // moved to the worker, not copied
 *
 * // ... training steps run here while the worker encodes and writes ...
 * const { digest } = await saving;
 * assert.deepEqual(spare[0]!.data, new Float32Array([1, 2, 3, 4])); // back, ready for reuse
 * await writer.close();
 *
 * const back = await loadCheckpoint(`${dir}/step-10.ckpt`, { sha256: digest });
 * assert.deepEqual(back.tensors[0]!.data, new Float32Array([1, 2, 3, 4]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class BackgroundWriter implements AsyncDisposable {
  #whenBusy: WhenBusy;
  #onReturn: ((tensors: TensorInput[]) => void) | undefined;
  #idleTimeout: number;
  #nice: number | undefined;
  #workerUrl: URL;
  #worker: WorkerHandle | undefined;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Saves handed to the worker and not settled yet, oldest first. */
  #jobs = new Map<number, Job>();
  #ledger = new SaveLedger("background saves");
  #nextId = 1;

  /**
   * Creates a writer and starts its worker (once, now, rather than in the middle of training).
   *
   * @param options See {@linkcode BackgroundWriterOptions}.
   */
  constructor(options: BackgroundWriterOptions = {}) {
    checkOptionNames(options, WRITER_OPTION_NAMES, "Cannot start BackgroundWriter");
    const whenBusy = options.whenBusy ?? DEFAULT_WHEN_BUSY;
    if (whenBusy !== "wait" && whenBusy !== "coalesce") {
      throw new TypeError(`Invalid option whenBusy: ${JSON.stringify(whenBusy)}, expected "wait" or "coalesce"`);
    }
    const idleTimeout = options.idleTimeout ?? DEFAULT_IDLE_TIMEOUT;
    if (typeof idleTimeout !== "number" || Number.isNaN(idleTimeout) || idleTimeout < 0) {
      throw new RangeError(`Invalid option idleTimeout: ${idleTimeout}, expected a non-negative number of ms`);
    }
    if (options.onReturn !== undefined && typeof options.onReturn !== "function") {
      throw new TypeError("Invalid option onReturn: expected a function");
    }
    const priority = options.priority ?? DEFAULT_PRIORITY;
    if (priority !== "background" && priority !== "normal") {
      throw new TypeError(`Invalid option priority: ${JSON.stringify(priority)}, expected "background" or "normal"`);
    }
    this.#nice = priority === "background" ? BACKGROUND_NICE : undefined;
    this.#whenBusy = whenBusy;
    this.#onReturn = options.onReturn;
    this.#idleTimeout = idleTimeout;
    this.#workerUrl = (options as { [WORKER_URL]?: URL })[WORKER_URL] ?? WORKER_MODULE;
    // Started now rather than at the first save: starting a worker blocks the calling thread,
    // better during setup than in the middle of training.
    this.#worker = this.#spawn();
    this.#becameIdle();
  }

  /**
   * Saves requested and not yet settled: the one in flight plus those waiting. A save settles when
   * this thread's event loop handles the worker's reply (see the class docs).
   */
  get pending(): number {
    return this.#ledger.pending;
  }

  /** Whether {@linkcode BackgroundWriter.close} was called. */
  get closed(): boolean {
    return this.#ledger.closed;
  }

  /**
   * Starts saving `checkpoint` to `target` in the worker and returns at once; the promise
   * settles when the file is written (or the save failed or was superseded). The tensors'
   * buffers are taken over before this returns (moved, or copied where they cannot be moved:
   * see the class docs), and the metadata is copied, so the caller may go on training.
   *
   * Throws at once, starting nothing and leaving the tensors alone, when the writer is closed,
   * when an earlier save failed and nobody listened to its promise (that error is thrown), or
   * when an argument is bad: `target` not a path, a `file:` or `opfs:` URL or `{ store, key }`
   * of a store with an address, metadata or a tensor invalid, data already detached, duplicate
   * names, `options.codec` not `"binary"` or `"json"`.
   *
   * @param target Where to write: a path or a `file:` URL (relative paths resolve now); in a
   *   browser an `opfs:///dir/name.ckpt` URL (the worker opens the Origin Private File System
   *   itself); or `{ store, key }` for a store that has an `address` the worker can open it by
   *   (an `OpfsStore` from `OpfsStore.open`, a `FileStore`).
   * @param checkpoint Metadata and an array of tensors.
   * @param options Codec (by name), compression and sync, as for `saveCheckpoint`.
   * @returns Bytes written and their SHA-256.
   *
   * @example
   * ```ts
   * import { BackgroundWriter } from "./writer.ts";
   * import assert from "node:assert/strict";
   * const dir = await Deno.makeTempDir();
   * await using writer = new BackgroundWriter();
   * const a = writer.save(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors: [] });
   * const b = writer.save(`${dir}/b.ckpt`, { metadata: { step: 2 }, tensors: [] }, { codec: "json" });
   * assert.equal(writer.pending, 2); // one in flight, one waiting its turn
   * assert.match((await a).digest, /^[0-9a-f]{64}$/);
   * assert.ok((await b).bytes > 0);
   * assert.throws(() => writer.save(`${dir}/c.ckpt`, { metadata: { step: -1 }, tensors: [] }), TypeError);
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  save(
    target: string | URL | StoreObject,
    checkpoint: BackgroundCheckpoint,
    options: SaveOptions = {},
  ): Promise<SaveResult> {
    if (this.#ledger.closed) throw new Error("Cannot save checkpoint: the BackgroundWriter is closed");
    this.#ledger.throwUnreported();
    const where = checkTarget(target);
    const path = where.path;
    const workerOptions = checkOptions(options);
    checkCheckpointObject(checkpoint, "Cannot save checkpoint in the background");
    validateMetadata(checkpoint.metadata);
    const metadata = structuredClone(checkpoint.metadata);
    const tensors = checkTensors(checkpoint.tensors);
    const id = this.#nextId++;
    const context = `Cannot save checkpoint (step ${metadata.step}) to ${JSON.stringify(path)}`;
    const post = (owned: OwnedTensors) => {
      const request: SaveRequest = {
        id,
        ...where,
        metadata,
        tensors: owned.tensors,
        headroom: owned.headroom,
        options: workerOptions,
        whenBusy: this.#whenBusy,
      };
      this.#worker ??= this.#spawn();
      this.#worker.postMessage(request, owned.transfer);
    };
    let owned: OwnedTensors | undefined;
    try {
      try {
        post(takeOwnership(tensors, "post")); // the caller's buffers, detached by the post itself
      } catch {
        // A buffer that cannot be detached (WebAssembly memory: DataCloneError in a browser, a
        // TypeError in Deno): nothing was sent or detached. Moved or copied here instead.
        post(owned = takeOwnership(tensors, "now"));
      }
    } catch (e) {
      // Never expected (everything sent was checked); buffers already taken are given back.
      const taken = owned;
      if (taken) queueMicrotask(() => this.#giveBack(taken.tensors));
      throw new Error(`${context}: cannot hand it to the worker: ${(e as Error)?.message ?? e}`, { cause: e });
    }
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    const { promise, resolve, reject } = SavePromise.create<SaveResult>();
    this.#jobs.set(id, { step: metadata.step, path, context, promise, resolve, reject });
    this.#ledger.begin();
    return promise;
  }

  /**
   * Starts a save whose tensors come later, pushed as they are read out of a model, so that the
   * worker encodes and writes the first while the next are still being copied. Throws at once as
   * `save()` does for a bad target, options or metadata, and for a writer that coalesces (a
   * streamed save is never superseded).
   *
   * @param target As for `save()`.
   * @param metadata The checkpoint's metadata, copied now.
   * @param options As for `save()`.
   * @returns `push` moves tensors' buffers to the worker (as `save()` does), to be written next;
   *   `end()` says no more come, `end(error)` fails the save with that error, writing nothing;
   *   `promise` settles as `save()`'s does.
   */
  [SAVE_STREAM](target: string | URL | StoreObject, metadata: Metadata, options: SaveOptions = {}): {
    push(tensors: readonly TensorInput[]): void;
    end(error?: unknown): void;
    promise: Promise<SaveResult>;
  } {
    if (this.#ledger.closed) throw new Error("Cannot save checkpoint: the BackgroundWriter is closed");
    if (this.#whenBusy !== "wait") throw new TypeError("Cannot stream a save to a BackgroundWriter that coalesces");
    this.#ledger.throwUnreported();
    const where = checkTarget(target);
    const workerOptions = checkOptions(options);
    validateMetadata(metadata);
    const copied = structuredClone(metadata);
    const id = this.#nextId++;
    const context = `Cannot save checkpoint (step ${copied.step}) to ${JSON.stringify(where.path)}`;
    const request: SaveRequest = {
      id,
      ...where,
      metadata: copied,
      tensors: [],
      stream: true,
      options: workerOptions,
      whenBusy: "wait",
    };
    const worker = this.#worker ??= this.#spawn();
    worker.postMessage(request, []);
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    const { promise, resolve, reject } = SavePromise.create<SaveResult>();
    const job: Job = { step: copied.step, path: where.path, context, promise, resolve, reject };
    this.#jobs.set(id, job);
    this.#ledger.begin();
    // Chunks go to the worker the save started on, and only while it still holds the save.
    const live = () => this.#worker === worker && this.#jobs.get(id) === job;
    let ended = false;
    return {
      push: (tensors) => {
        if (ended) throw new Error(`${context}: its stream has ended`);
        if (!live()) return; // the worker crashed: the save has failed, these go to the collector
        const checked = checkTensors(tensors);
        const post = (owned: OwnedTensors) => {
          const chunk: TensorChunk = { chunk: id, tensors: owned.tensors, headroom: owned.headroom };
          worker.postMessage(chunk, owned.transfer);
        };
        try {
          post(takeOwnership(checked, "post"));
        } catch {
          post(takeOwnership(checked, "now")); // as in save(): a buffer that cannot be detached
        }
      },
      end: (...error: unknown[]) => {
        if (ended) return;
        ended = true;
        if (error.length > 0) job.streamError = { error: error[0] };
        if (!live()) return;
        const chunk: TensorChunk = { chunk: id, tensors: [], end: true };
        if (error.length > 0) chunk.error = serializeError(error[0]);
        worker.postMessage(chunk, []);
      },
      promise,
    };
  }

  /**
   * Waits until no save is in flight or waiting, then throws the first failure nobody has
   * listened to (an `AggregateError` when there are several), once.
   *
   * @example
   * ```ts
   * import { BackgroundWriter } from "./writer.ts";
   * import assert from "node:assert/strict";
   * const writer = new BackgroundWriter();
   * writer.save("/nonexistent-dir/a.ckpt", { metadata: { step: 3 }, tensors: [] }); // not awaited
   * await assert.rejects(writer.flush(), /Cannot save checkpoint \(step 3\) to "\/nonexistent-dir\/a.ckpt"/);
   * await writer.flush(); // reported once
   * await writer.close();
   * ```
   */
  flush(): Promise<void> {
    return this.#ledger.flush();
  }

  /**
   * Stops taking saves, waits for those requested, terminates the worker (so it no longer keeps
   * the process alive), and throws any failure nobody listened to. Later calls return the same
   * promise.
   *
   * @example
   * ```ts
   * import { BackgroundWriter } from "./writer.ts";
   * import assert from "node:assert/strict";
   * const writer = new BackgroundWriter();
   * await writer.close();
   * assert.ok(writer.closed);
   * assert.throws(() => writer.save("x.ckpt", { metadata: { step: 0 }, tensors: [] }), /closed/);
   * ```
   */
  close(): Promise<void> {
    return this.#ledger.close(() => this.#stopWorker());
  }

  /** Same as {@linkcode BackgroundWriter.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #spawn(): WorkerHandle {
    const worker = startWorker(this.#workerUrl);
    const setup: WorkerSetup = { setup: this.#nice === undefined ? {} : { nice: this.#nice } };
    worker.postMessage(setup, []); // first, before any save
    worker.onmessage = (e: WorkerMessage<SaveReply>) => this.#onReply(worker, e.data);
    worker.onerror = (e: WorkerFailure) => {
      e.preventDefault(); // handled here: must not take the whole process down
      this.#onCrash(worker, e.message || "unknown error");
    };
    worker.onmessageerror = () => this.#onCrash(worker, "its reply could not be read");
    return worker;
  }

  #onReply(worker: WorkerHandle, reply: SaveReply): void {
    const job = this.#jobs.get(reply?.id);
    if (worker !== this.#worker || !job) return;
    this.#jobs.delete(reply.id);
    this.#giveBack(reply.tensors);
    if (reply.status === "saved") job.resolve(reply.result);
    else if (reply.status === "failed") {
      const error = job.streamError?.error;
      this.#fail(
        job,
        job.streamError
          ? (error instanceof Error ? error : new Error(String(error)))
          : rebuildError(reply.error, job.context),
      );
    } else job.reject(new SupersededError({ path: job.path, step: job.step }, reply.by));
    this.#ledger.end();
    if (this.#jobs.size === 0) this.#becameIdle();
  }

  /** The worker died: every save it held fails (their buffers went down with it). */
  #onCrash(worker: WorkerHandle, why: string): void {
    if (worker !== this.#worker) return;
    this.#stopWorker();
    const jobs = [...this.#jobs.values()];
    this.#jobs.clear();
    for (const job of jobs) {
      this.#fail(job, new Error(`${job.context}: the background worker crashed: ${why}`));
      this.#ledger.end();
    }
    this.#becameIdle();
  }

  #giveBack(tensors: TensorInput[] | undefined): void {
    if (!this.#onReturn || !tensors?.length) return;
    try {
      this.#onReturn(tensors);
    } catch (e) {
      this.#ledger.failed(
        new Error(`BackgroundWriter onReturn callback threw: ${(e as Error)?.message ?? e}`, { cause: e }),
      );
    }
  }

  #fail(job: Job, error: Error): void {
    this.#ledger.failed(error, job.promise);
    job.reject(error);
  }

  #becameIdle(): void {
    if (!this.#worker || this.#ledger.closed || !Number.isFinite(this.#idleTimeout)) return;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#jobs.size === 0) this.#stopWorker();
    }, this.#idleTimeout);
  }

  #stopWorker(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    this.#worker?.terminate();
    this.#worker = undefined;
  }
}
