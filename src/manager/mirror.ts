/**
 * Two tiers: a {@linkcode MirroredManager} commits every checkpoint to a local directory first
 * (fast and crash-safe, as a `CheckpointManager` does) and replicates it in the background to a
 * second location, usually object storage (`s3://bucket/prefix`), with its own retention. Resuming
 * considers both tiers and takes the newest checkpoint that verifies, from either; one found only
 * on the mirror (local disk lost, local copy damaged) is copied back into the local tier. A
 * mirror that is down never stops training or local saves: replication retries with backoff,
 * catches up when the mirror is back (also after a restart), and {@linkcode MirroredManager.status}
 * says what is behind. Modelled on Orbax's emergency checkpointing (local and persistent tiers).
 *
 * @module
 */
import type { Checkpoint, CheckpointInput } from "../format/types.ts";
import type { ObjectStore } from "../storage/types.ts";
import type { CheckpointEntry, ListedCheckpoint } from "./entry.ts";
import { CheckpointManager } from "./mod.ts";
import { readShardManifest } from "../shard/read.ts";
import type { ManagerSaveOptions } from "./sharded.ts";
import { type CheckpointManagerOptions, DEFAULT_MAX_TO_KEEP } from "./options.ts";
import { retention, type RetentionPolicy } from "./_retention.ts";
import type { Metadata } from "../format/types.ts";
import { unref } from "../runtime/signals.ts";
import { isNotFound } from "./_errors.ts";
import { ChecksumMismatchError } from "../format/errors.ts";

/** The default of {@linkcode MirroredManagerOptions.mirror}: the mirror's retention. */
export const DEFAULT_MIRROR_OPTIONS: Readonly<CheckpointManagerOptions> = Object.freeze({ maxToKeep: 3 });

/** The default of {@linkcode MirroredManagerOptions.retryDelay}, in ms. */
export const DEFAULT_RETRY_DELAY = 500;

/** The default of {@linkcode MirroredManagerOptions.maxRetryDelay}, in ms. */
export const DEFAULT_MAX_RETRY_DELAY = 30_000;

/** How often a replication waiting for a local save to end looks again, in ms. */
const LOCAL_IDLE_POLL = 5;

/** The default of {@linkcode MirroredManagerOptions.closeTimeout}, in ms. */
export const DEFAULT_CLOSE_TIMEOUT = 10_000;

/** Options for {@linkcode MirroredManager.open}. */
export interface MirroredManagerOptions {
  /**
   * The local tier's options (retention, codec, `writer`, ...), as for `CheckpointManager.open`.
   *
   * @default {{}} (keeps the newest 5)
   */
  local?: CheckpointManagerOptions;
  /**
   * The mirror's options: its own retention (such as `{ maxToKeep: 3, keepEvery: 500 }`),
   * codec, `incremental` (tensors that did not change are not uploaded again), `storage`
   * (credentials of an `s3://` address; by default the `AWS_*` variables, then `~/.aws`).
   *
   * @default {{ maxToKeep: 3 }}
   */
  mirror?: CheckpointManagerOptions;
  /**
   * Milliseconds before the first retry of a failed replication (or of reaching the mirror);
   * each further failure doubles it, up to `maxRetryDelay`.
   *
   * @default {500}
   */
  retryDelay?: number;
  /**
   * The longest wait between two tries, in ms.
   *
   * @default {30000}
   */
  maxRetryDelay?: number;
  /**
   * How long `close()` waits for the replication of what is committed locally, in ms; what is
   * still behind then is replicated by the next open (catch-up).
   *
   * @default {10000}
   */
  closeTimeout?: number;
  /**
   * Receives warnings of both tiers and of replication (the mirror unreachable, back, behind).
   *
   * @default {console.warn}
   */
  onWarning?: (message: string) => void;
}

/** Where replication stands: see {@linkcode MirroredManager.status}. */
export interface MirrorStatus {
  /** The mirror's URL. */
  url: string;
  /** Whether the mirror answered the last time it was asked. */
  reachable: boolean;
  /** The newest step on the mirror, as far as this manager knows. */
  newest: number | undefined;
  /** Steps committed locally and not yet on the mirror, oldest first. */
  behind: number[];
  /** Failed tries since the last success. */
  failures: number;
  /** The last failure's message, while failures > 0. */
  lastError?: string;
}

/** A checkpoint of either tier, as {@linkcode MirroredManager.list} shows it. */
export interface TieredCheckpoint {
  /** Its step. */
  step: number;
  /** The local tier's entry, when it has one. */
  local?: ListedCheckpoint;
  /** The mirror's entry, when it has one (and the mirror answered). */
  mirror?: ListedCheckpoint;
}

function ms(value: unknown, name: string, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !(v >= 0)) {
    throw new RangeError(`Invalid option ${name}: ${String(v)}, expected a non-negative number of ms`);
  }
  return v;
}

/** The retention rules of a manager's options, with their defaults. */
function policyOf(o: CheckpointManagerOptions): RetentionPolicy {
  const best = o.best ? { metric: o.best.metric, mode: o.best.mode, keep: o.best.keep ?? 1 } : undefined;
  return {
    maxToKeep: o.maxToKeep ?? DEFAULT_MAX_TO_KEEP,
    keepEvery: o.keepEvery,
    keepTimeInterval: o.keepTimeInterval,
    best,
  };
}

const describe = (e: unknown) => (e as Error)?.message ?? String(e);

/**
 * A checkpoint manager with two tiers: a local directory, where saves commit, and a mirror that
 * every committed checkpoint is replicated to in the background. See the module docs.
 *
 * **Guarantees.** `save()` resolves when the local tier committed (as `CheckpointManager.save`);
 * the mirror never delays or fails it. The mirror only ever holds checkpoints committed through
 * its own manager (written, then the index updated conditionally): an interrupted upload leaves
 * nothing the mirror's index lists. Replication goes in step order and never goes back: a step
 * at or below the mirror's newest is not sent.
 *
 * @example
 * ```ts
 * import { MirroredManager } from "./mirror.ts";
 * import assert from "node:assert/strict";
 *
 * const root = await Deno.makeTempDir();
 * const manager = await MirroredManager.open(`${root}/local`, `${root}/mirror`, {
 *   local: { maxToKeep: 1 },
 *   mirror: { maxToKeep: 2 },
 * });
 * for (const step of [10, 20, 30]) {
 *   await manager.save({
 *     metadata: { step },
 *     tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([step]) }],
 *   });
 * }
 * await manager.mirrored(); // replication is in the background: wait for it here
 * assert.deepEqual(manager.status().behind, []);
 * assert.deepEqual(
 *   (await manager.list()).map((c) => [c.step, c.local !== undefined, c.mirror !== undefined]),
 *   [[20, false, true], [30, true, true]],
 * );
 * await manager.close();
 *
 * // The local directory is lost: the next open resumes from the mirror, and copies it back.
 * await Deno.remove(`${root}/local`, { recursive: true });
 * const again = await MirroredManager.open(`${root}/local`, `${root}/mirror`);
 * assert.equal((await again.latest())?.metadata.step, 30);
 * assert.deepEqual((await again.local.list()).map((e) => e.step), [30]);
 * await again.close();
 * await Deno.remove(root, { recursive: true });
 * ```
 */
export class MirroredManager implements AsyncDisposable {
  #local: CheckpointManager;
  /** The local tier's sharded checkpoints by step: their manifests, to replicate them sharded. */
  #sharded = new Map<number, string>();
  /** The local tier's retention, applied here (never to a checkpoint the mirror still needs). */
  #localPolicy: RetentionPolicy;
  #mirrorPolicy: RetentionPolicy;
  /** The mirror's checkpoints as last seen, for its retention. */
  #mirrorEntries: { step: number; metadata: Metadata; savedAt: string }[] = [];
  #target: string | URL | ObjectStore;
  #url: string;
  #mirrorOptions: CheckpointManagerOptions;
  #mirror: CheckpointManager | undefined;
  #warn: (message: string) => void;
  #retryDelay: number;
  #maxRetryDelay: number;
  #closeTimeout: number;
  /** Steps committed locally, waiting to be replicated, in order. */
  #queue: number[] = [];
  #newest: number | undefined;
  #reachable = false;
  #failures = 0;
  #lastError: string | undefined;
  #pumping: Promise<void> | undefined;
  #idleWaiters: (() => void)[] = [];
  #wake: (() => void) | undefined;
  #stopping = false;
  #closing: Promise<void> | undefined;
  #pruning: Promise<void> = Promise.resolve();

  private constructor(local: CheckpointManager, target: string | URL | ObjectStore, o: MirroredManagerOptions) {
    this.#local = local;
    this.#localPolicy = policyOf(o.local ?? {});
    this.#mirrorPolicy = policyOf(o.mirror ?? DEFAULT_MIRROR_OPTIONS);
    this.#target = target;
    this.#url = typeof target === "string" ? target : target instanceof URL ? target.href : target.url;
    this.#mirrorOptions = { ...(o.mirror ?? DEFAULT_MIRROR_OPTIONS) };
    this.#warn = o.onWarning ?? ((m) => console.warn(m));
    this.#mirrorOptions.onWarning ??= (m) => this.#warn(`mirror: ${m}`);
    this.#retryDelay = ms(o.retryDelay, "retryDelay", DEFAULT_RETRY_DELAY);
    this.#maxRetryDelay = ms(o.maxRetryDelay, "maxRetryDelay", DEFAULT_MAX_RETRY_DELAY);
    this.#closeTimeout = ms(o.closeTimeout, "closeTimeout", DEFAULT_CLOSE_TIMEOUT);
  }

  /**
   * Opens the local tier (taking its lock, as `CheckpointManager.open`), then tries the mirror
   * once: when it answers, the local checkpoints newer than the mirror's newest are queued for
   * replication (catch-up after a restart); when it does not, that is a warning, and the mirror
   * is tried again in the background.
   *
   * @param local The local directory.
   * @param mirror The mirror: an address (`s3://bucket/prefix`, a path, a `file:` URL) or a store.
   * @param options See {@linkcode MirroredManagerOptions}.
   */
  static async open(
    local: string | URL,
    mirror: string | URL | ObjectStore,
    options: MirroredManagerOptions = {},
  ): Promise<MirroredManager> {
    if (typeof options !== "object" || options === null) throw new TypeError("Invalid options: expected an object");
    if (typeof mirror !== "string" && !(mirror instanceof URL) && typeof (mirror as ObjectStore)?.get !== "function") {
      throw new TypeError("Cannot open the mirror: expected an address or an ObjectStore");
    }
    if (options.mirror?.readOnly || options.local?.readOnly) {
      throw new TypeError(
        "Invalid option readOnly: a MirroredManager writes both tiers; open a CheckpointManager to look",
      );
    }
    const warn = options.onWarning ?? ((m: string) => console.warn(m));
    // Retention of the local tier is applied by the MirroredManager, which keeps what the
    // mirror still needs: the local manager itself keeps everything.
    const manager = await CheckpointManager.open(local, {
      onWarning: warn,
      ...options.local,
      maxToKeep: Infinity,
      keepEvery: undefined,
      keepTimeInterval: undefined,
      best: undefined,
    });
    let m: MirroredManager;
    try {
      m = new MirroredManager(manager, mirror, options);
    } catch (e) {
      await manager.close();
      throw e;
    }
    const committed = await manager.list();
    for (const e of committed) if (e.kind === "sharded") m.#sharded.set(e.step, e.path);
    if (await m.#connect()) {
      const behind = committed.map((e) => e.step).filter((s) => s > (m.#newest ?? -1));
      if (behind.length > 0) {
        m.#warn(
          `mirror ${m.#url} is behind by ${behind.length} checkpoint(s) (steps ${behind.join(", ")}): catching up`,
        );
        m.#enqueue(...behind);
      }
    } else {
      // Nothing known of the mirror: every local checkpoint may be missing there, found out once it answers.
      m.#queue.push(...committed.map((e) => e.step));
      m.#pump();
    }
    return m;
  }

  /** The local tier (its list, load, delete). */
  get local(): CheckpointManager {
    return this.#local;
  }

  /** The local directory. */
  get dir(): string {
    return this.#local.dir;
  }

  /** Where replication stands: the mirror reachable or not, its newest step, the steps behind. */
  status(): MirrorStatus {
    const status: MirrorStatus = {
      url: this.#url,
      reachable: this.#reachable,
      newest: this.#newest,
      behind: [...this.#queue],
      failures: this.#failures,
    };
    if (this.#failures > 0 && this.#lastError !== undefined) status.lastError = this.#lastError;
    return status;
  }

  /**
   * Saves to the local tier (see `CheckpointManager.save`) and, once committed there, queues the
   * checkpoint for the mirror. Resolves with the local entry; the mirror never delays or fails it.
   *
   * @param checkpoint As for `CheckpointManager.save`.
   * @param options As for `CheckpointManager.save`: a sharded save is sharded on the mirror too
   * (as many parts, written by the replicating process; the manifest last, then the mirror's index).
   */
  save(checkpoint: CheckpointInput, options: ManagerSaveOptions = {}): Promise<CheckpointEntry> {
    if (this.#stopping) throw new Error("Cannot save checkpoint: the MirroredManager is closed");
    const saved = this.#local.save(checkpoint, options);
    // Not a rejection handler: a failed local save stays the local manager's to report.
    saved.then((entry) => {
      if (entry.kind === "sharded") this.#sharded.set(entry.step, entry.path);
      this.#enqueue(entry.step);
      void this.#prune();
    });
    return saved;
  }

  /**
   * The newest checkpoint that verifies, from either tier. The local tier's newest good one
   * (damaged ones are skipped and moved aside, as `CheckpointManager.latest` does) is compared
   * with the mirror's steps above it, newest first: a mirror checkpoint that verifies wins, and is
   * copied back into the local tier (its bytes are the same: checkpoints encode
   * deterministically). A mirror that does not answer is a warning, not an error.
   */
  async latest(): Promise<Checkpoint | undefined> {
    const local = await this.#local.latest();
    const above = local?.metadata.step ?? -1;
    const mirror = this.#mirror ?? (await this.#connect() ? this.#mirror : undefined);
    if (!mirror) return local;
    let steps: number[];
    try {
      steps = (await mirror.list()).map((e) => e.step).filter((s) => s > above).reverse();
    } catch (e) {
      this.#warn(`mirror ${this.#url} cannot be listed (${describe(e)}): resuming from the local tier`);
      return local;
    }
    for (const step of steps) {
      let checkpoint: Checkpoint;
      try {
        checkpoint = await mirror.load(step);
      } catch (e) {
        this.#warn(`Skipping mirror checkpoint step ${step} in ${this.#url}: ${describe(e)}`);
        continue;
      }
      this.#warn(
        `resuming from step ${step} on the mirror ${this.#url} (newer than the local tier's); copying it back`,
      );
      try {
        // A copy: the local tier's writer may move the buffers it is given to a worker.
        await this.#local.save({
          metadata: checkpoint.metadata,
          tensors: checkpoint.tensors.map((t) => ({ ...t, data: t.data.slice() })),
        });
      } catch (e) {
        this.#warn(`Cannot copy step ${step} back into ${this.#local.dir}: ${describe(e)}`);
      }
      return checkpoint;
    }
    return local;
  }

  /**
   * Both tiers' checkpoints by step, oldest first. The mirror's part is missing when it does not
   * answer (see {@linkcode MirroredManager.status}).
   */
  async list(): Promise<TieredCheckpoint[]> {
    const byStep = new Map<number, TieredCheckpoint>();
    const at = (step: number) => byStep.get(step) ?? byStep.set(step, { step }).get(step)!;
    for (const e of await this.#local.list()) at(e.step).local = e;
    const mirror = this.#mirror ?? (await this.#connect() ? this.#mirror : undefined);
    if (mirror) {
      try {
        for (const e of await mirror.list()) at(e.step).mirror = e;
      } catch (e) {
        this.#warn(`mirror ${this.#url} cannot be listed: ${describe(e)}`);
      }
    }
    return [...byStep.values()].sort((a, b) => a.step - b.step);
  }

  /** Waits for the local tier's pending saves (and reports their failures), not for the mirror. */
  flush(): Promise<void> {
    return this.#local.flush();
  }

  /**
   * Resolves once everything committed locally so far is on the mirror, or after `timeout` ms
   * (then `status().behind` says what is not).
   *
   * @param timeout Milliseconds to wait at most.
   * @returns Whether nothing is behind.
   */
  async mirrored(timeout = Infinity): Promise<boolean> {
    await this.#local.flush().catch(() => {}); // the local tier's failures are for flush() and close()
    if (this.#queue.length === 0) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const idle = new Promise<void>((r) => this.#idleWaiters.push(r));
    await Promise.race([
      idle,
      Number.isFinite(timeout) ? new Promise<void>((r) => timer = setTimeout(r, timeout)) : idle,
    ]);
    clearTimeout(timer);
    return this.#queue.length === 0;
  }

  /**
   * Flushes the local tier, waits up to `closeTimeout` for replication (what is still behind is
   * a warning, and the next open catches up), closes the mirror, and closes the local tier
   * (releasing its lock). Later calls return the same promise.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#stopping = true;
      try {
        if (!await this.mirrored(this.#closeTimeout)) {
          this.#warn(
            `mirror ${this.#url} is behind by ${this.#queue.length} checkpoint(s) (steps ${
              this.#queue.join(", ")
            }): the next open catches up`,
          );
        }
      } finally {
        this.#wake?.(); // a pump waiting to retry stops now
        await this.#pumping;
        await this.#pruning;
        await this.#mirror?.close().catch(() => {});
        await this.#local.close();
      }
    })();
    return this.#closing;
  }

  /** Same as {@linkcode MirroredManager.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Applies the local tier's retention, except to checkpoints still waiting for the mirror that
   * the mirror's retention would keep (so a mirror that is down does not lose its every-N-th or
   * newest checkpoints to the local tier's pruning).
   */
  #prune(): Promise<void> {
    // One at a time: a save's and the replication's could otherwise delete the same step twice.
    this.#pruning = this.#pruning.then(() => this.#pruneNow()).catch((e) =>
      this.#warn(`Cannot apply retention to ${this.#local.dir}: ${describe(e)}`)
    );
    return this.#pruning;
  }

  async #pruneNow(): Promise<void> {
    const local = await this.#local.list();
    const keep = retention(local, this.#localPolicy);
    const waiting = local.filter((e) => this.#queue.includes(e.step));
    const mirrorKeeps = retention([...this.#mirrorEntries, ...waiting], this.#mirrorPolicy);
    for (const e of local) {
      if (keep.get(e.step)?.length) continue;
      if (this.#queue.includes(e.step) && mirrorKeeps.get(e.step)?.length) continue;
      if (this.#queue.includes(e.step)) this.#queue.splice(this.#queue.indexOf(e.step), 1);
      await this.#local.delete(e.step);
    }
  }

  /** Opens the mirror's manager if it is not open; false (with a warning) when it does not answer. */
  async #connect(): Promise<boolean> {
    if (this.#mirror) return true;
    try {
      this.#mirror = await CheckpointManager.open(this.#target as string, this.#mirrorOptions);
      this.#mirrorEntries = (await this.#mirror.list()).map((e) => ({
        step: e.step,
        metadata: e.metadata,
        savedAt: e.savedAt,
      }));
      this.#newest = this.#mirrorEntries.at(-1)?.step;
      if (!this.#reachable && this.#failures > 0) this.#warn(`mirror ${this.#url} answers again: catching up`);
      this.#reachable = true;
      return true;
    } catch (e) {
      await this.#mirror?.close().catch(() => {});
      this.#mirror = undefined;
      this.#fail(e);
      return false;
    }
  }

  #fail(e: unknown): void {
    this.#failures++;
    this.#lastError = describe(e);
    if (this.#reachable || this.#failures === 1) {
      this.#warn(
        `mirror ${this.#url} is unreachable (${this.#lastError}): training and local saves go on; retrying in the background`,
      );
    }
    this.#reachable = false;
  }

  #enqueue(...steps: number[]): void {
    for (const step of steps) {
      if (!this.#queue.includes(step)) this.#queue.push(step);
    }
    this.#queue.sort((a, b) => a - b);
    this.#pump();
  }

  #pump(): void {
    this.#pumping ??= this.#drain().finally(() => {
      this.#pumping = undefined;
      if (this.#queue.length === 0) { for (const wake of this.#idleWaiters.splice(0)) wake(); }
    });
  }

  /** Replicates the queue in order; on failure waits (doubling) and tries again, until closed. */
  async #drain(): Promise<void> {
    let delay = this.#retryDelay;
    while (this.#queue.length > 0) {
      const step = this.#queue[0]!;
      let ok: boolean;
      try {
        ok = await this.#replicate(step);
      } catch (e) {
        this.#fail(e);
        ok = false;
      }
      if (ok) {
        // By value: retention may have taken steps out of the queue while this one was sent.
        const at = this.#queue.indexOf(step);
        if (at >= 0) this.#queue.splice(at, 1);
        delay = this.#retryDelay;
        await this.#prune();
        continue;
      }
      if (this.#stopping) return; // close() waited long enough; the next open catches up
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        unref(timer);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
      delay = Math.min(delay * 2, this.#maxRetryDelay);
    }
  }

  /**
   * Resolves once the local tier writes no save: replication goes a chunk at a time between
   * local saves, so on a machine with few cores it does not slow the saves the training loop
   * waits for (it catches up while the loop computes). Polled: the local tier says only whether
   * a save is pending.
   */
  async #localIdle(): Promise<void> {
    while (this.#local.pending && !this.#stopping) {
      // Not unref'd: a replication under way keeps the process alive, as its upload does.
      await new Promise<void>((resolve) => setTimeout(resolve, LOCAL_IDLE_POLL));
    }
  }

  /** Sends one step: true when it is on the mirror (or no longer needs to be), false to retry. */
  async #replicate(step: number): Promise<boolean> {
    if (!await this.#connect()) return false;
    const mirror = this.#mirror!;
    if (this.#newest !== undefined && step <= this.#newest) return true; // never goes back
    let copied: { metadata: Metadata; savedAt: string };
    const manifest = this.#sharded.get(step);
    try {
      if (manifest !== undefined) {
        // A sharded checkpoint: as many parts on the mirror, written here: parts first, the
        // manifest, then its index.
        const checkpoint = await this.#local.load(step);
        const shards = (await readShardManifest(manifest)).manifest.parts.length;
        await mirror.save(checkpoint, { shards });
        copied = { metadata: checkpoint.metadata, savedAt: new Date().toISOString() };
      } else {
        // The committed file as it is, hashed on the way up and published only when its digest is
        // the one the local index recorded (see CheckpointManager.copyFrom).
        copied = await mirror.copyFrom(this.#local, step, { pace: () => this.#localIdle() });
      }
    } catch (e) {
      if (e instanceof ChecksumMismatchError || e instanceof SyntaxError || isNotFound(e)) {
        // Retention removed it meanwhile, or it is damaged: nothing to send.
        if (!(await this.#local.list()).some((c) => c.step === step)) return true;
        this.#warn(`Cannot replicate step ${step}: the local copy does not verify (${describe(e)})`);
        return true;
      }
      // The mirror's manager may be fenced or in doubt about its index: open it afresh next time.
      this.#mirror = undefined;
      await mirror.close().catch(() => {});
      throw e;
    }
    this.#newest = step;
    this.#sharded.delete(step);
    this.#mirrorEntries.push({ step, metadata: copied.metadata, savedAt: copied.savedAt });
    this.#mirrorEntries = this.#mirrorEntries.filter((e) =>
      retention(this.#mirrorEntries, this.#mirrorPolicy).get(e.step)?.length
    );
    if (this.#failures > 0) {
      this.#failures = 0;
      this.#lastError = undefined;
    }
    this.#reachable = true;
    return true;
  }
}
