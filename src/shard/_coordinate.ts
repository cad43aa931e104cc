// Coordination of a sharded save's writers and its committer: each writer announces its part
// with a done record once the part is durable; the committer collects every writer's record
// (or gives up at a deadline, naming the writers that did not finish). Two ways: in memory, for
// writers in one JS thread; through the store, for writers in other threads, processes or hosts
// (a done record is a small object beside the parts).
import type { ObjectStore } from "../storage/types.ts";
import type { DType, Metadata } from "../format/types.ts";
import type { ShardPart } from "./manifest.ts";
import { doneName, ShardDeadlineError, ShardWriterError } from "./errors.ts";

/** One slice a writer wrote, with where it lies in its part. */
export interface DoneSlice {
  /** The tensor's position in the plan, which the manifest's order of tensors follows. */
  index: number;
  /** The tensor's name. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** The whole tensor's dimensions. */
  shape: number[];
  /** What it is for. */
  group: string;
  /** The rows it holds, `[start, end)`. */
  rows: [number, number];
  /** Byte offset of its record in the part. */
  offset: number;
  /** Bytes of its record. */
  length: number;
  /** The record's digest (hex). */
  digest: string;
}

/** What a writer announces once its part is durable. */
export interface DoneRecord {
  /** The save attempt. */
  saveId: string;
  /** The writer (0-based). */
  writer: number;
  /** How many writers the save has. */
  writers: number;
  /** Its part: name, size, stream digest. */
  part: ShardPart;
  /** The metadata it wrote in its part. */
  metadata: Metadata;
  /** Every slice in its part. */
  slices: DoneSlice[];
  /**
   * Set when the writer failed: what went wrong. The committer then fails at once, naming the
   * writer, and commits nothing.
   */
  error?: string;
}

/**
 * How a sharded save's writers tell its committer that their parts are durable. ckpt has two:
 * through the store (the default: done records beside the parts, for writers anywhere) and
 * {@linkcode memoryCoordinator} (writers in one JS thread).
 */
export interface ShardCoordinator {
  /** Announces a writer's part; resolves once the announcement is durable where it goes. */
  publish(record: DoneRecord): Promise<void>;
  /**
   * Every writer's record, in writer order, once all of `writers` have published for `saveId`;
   * a `ShardDeadlineError` naming the missing writers when `deadline` milliseconds pass first.
   */
  collect(saveId: string, writers: number, options: { deadline: number; signal?: AbortSignal }): Promise<DoneRecord[]>;
}

/**
 * A coordinator for writers in one JS thread (concurrent async saves): records are handed over
 * in memory, nothing is written for them.
 *
 * @example
 * ```ts
 * import { memoryCoordinator } from "./_coordinate.ts";
 * import assert from "node:assert/strict";
 * const c = memoryCoordinator();
 * await assert.rejects(c.collect("s", 1, { deadline: 10 }), /writer 0 of 1/);
 * ```
 */
export function memoryCoordinator(): ShardCoordinator {
  const saves = new Map<string, Map<number, DoneRecord>>();
  const changed = new Set<() => void>();
  return {
    publish(record) {
      let got = saves.get(record.saveId);
      if (!got) saves.set(record.saveId, got = new Map());
      got.set(record.writer, structuredClone(record));
      for (const wake of [...changed]) wake();
      return Promise.resolve();
    },
    collect(saveId, writers, { deadline, signal }) {
      return waitFor(writers, deadline, signal, (wake) => {
        changed.add(wake);
        return () => changed.delete(wake);
      }, () => Promise.resolve(saves.get(saveId) ?? new Map()));
    },
  };
}

/** Options for {@linkcode channelCoordinator}. */
export interface ChannelCoordinatorOptions {
  /**
   * How long a writer's channel stays open after it published, answering a committer that asks
   * late, unless the committer says it collected everything first, in milliseconds. An open
   * channel keeps its thread alive.
   *
   * @default {600000} (10 minutes, the committer's default deadline)
   */
  linger?: number;
}

/**
 * A coordinator for writers on several threads of one process (worker threads): records go
 * over a `BroadcastChannel` named after `name` (give every writer of one save the same name),
 * nothing is written for them. A committer that starts collecting after some writers published
 * asks, and they publish again; once it has every record it tells them, and they close their
 * channels. So a writer's thread must live until then (or until `linger` passes): a record
 * published by a thread that ended before the committer asked is lost, and the committer waits
 * for it until its deadline.
 *
 * @example
 * ```ts
 * import { channelCoordinator } from "./_coordinate.ts";
 * import assert from "node:assert/strict";
 * const record = {
 *   saveId: "s", writer: 0, writers: 1, metadata: { step: 1 }, slices: [],
 *   part: { name: "part-00001-of-00001.ckpt", bytes: 64, digest: "0".repeat(64) },
 * };
 * await channelCoordinator("demo").publish(record); // in one thread ...
 * const got = await channelCoordinator("demo").collect("s", 1, { deadline: 5000 }); // ... and another
 * assert.equal(got[0]!.writer, 0);
 * ```
 */
export function channelCoordinator(name: string, options: ChannelCoordinatorOptions = {}): ShardCoordinator {
  if (typeof name !== "string" || name === "") throw new TypeError("Invalid channel name: expected a non-empty string");
  const linger = options.linger ?? 10 * 60 * 1000;
  if (!Number.isSafeInteger(linger) || linger < 0) {
    throw new RangeError(`Invalid linger ${linger}: expected milliseconds`);
  }
  const topic = `ckpt-shard:${name}`;
  return {
    publish(record) {
      const channel = new BroadcastChannel(topic);
      const send = () => channel.postMessage({ kind: "done", record });
      const close = () => {
        clearTimeout(timer);
        channel.close();
      };
      const timer = setTimeout(close, linger);
      channel.onmessage = (e: MessageEvent) => {
        const m = e.data as { kind?: string; saveId?: string } | null;
        if (m?.saveId !== record.saveId) return;
        if (m.kind === "ask") send();
        else if (m.kind === "collected") close();
      };
      send();
      return Promise.resolve();
    },
    collect(saveId, writers, { deadline, signal }) {
      const channel = new BroadcastChannel(topic);
      const got = new Map<number, DoneRecord>();
      return waitFor(writers, deadline, signal, (wake) => {
        channel.onmessage = (e: MessageEvent) => {
          const m = e.data as { kind?: string; record?: DoneRecord } | null;
          const r = m?.kind === "done" ? m.record : undefined;
          if (r?.saveId !== saveId || r.writers !== writers || !Number.isSafeInteger(r.writer)) return;
          if (r.writer < 0 || r.writer >= writers) return;
          got.set(r.writer, r);
          wake();
        };
        channel.postMessage({ kind: "ask", saveId });
        return () => {
          channel.postMessage({ kind: "collected", saveId });
          channel.close();
        };
      }, () => Promise.resolve(got));
    },
  };
}

/** A coordinator through `store`: done records are objects under `prefix` (which ends in `/`). */
export function storeCoordinator(store: ObjectStore, prefix: string, poll: number): ShardCoordinator {
  const found = new Map<number, DoneRecord>();
  return {
    async publish(record) {
      const bytes = new TextEncoder().encode(JSON.stringify(record) + "\n");
      await store.put(prefix + doneName(record.writer, record.writers), bytes);
    },
    collect(saveId, writers, { deadline, signal }) {
      return waitFor(writers, deadline, signal, (wake) => {
        const timer = setInterval(wake, poll);
        return () => clearInterval(timer);
      }, async () => {
        const names = new Set<string>();
        for await (const o of store.list(prefix)) names.add(o.key.slice(prefix.length));
        for (let w = 0; w < writers; w++) {
          if (found.has(w) || !names.has(doneName(w, writers))) continue;
          found.set(w, await readDone(store, prefix + doneName(w, writers), saveId, w, writers));
        }
        return found;
      });
    },
  };
}

/** Reads and checks a done record from the store: it must be this save's, this writer's. */
async function readDone(store: ObjectStore, key: string, saveId: string, writer: number, writers: number) {
  const { body } = await store.get(key);
  const text = await new Response(body).text();
  const where = `${store.url}${key}`;
  let value: DoneRecord;
  try {
    value = JSON.parse(text);
  } catch {
    throw new SyntaxError(`Cannot commit sharded checkpoint: done record ${where} is not JSON`);
  }
  if (
    typeof value !== "object" || value === null || value.saveId !== saveId || value.writer !== writer ||
    value.writers !== writers || typeof value.part !== "object" || !Array.isArray(value.slices)
  ) {
    throw new SyntaxError(
      `Cannot commit sharded checkpoint: done record ${where} is not writer ${writer} of ${writers}'s for save ${
        JSON.stringify(saveId)
      }`,
    );
  }
  return value;
}

/**
 * Polls `look` whenever `subscribe`'s callback fires until it holds a record for every writer,
 * then gives them in writer order; past `deadline` ms a `ShardDeadlineError` (its address left
 * for the committer to fill in) names the writers missing.
 */
function waitFor(
  writers: number,
  deadline: number,
  signal: AbortSignal | undefined,
  subscribe: (wake: () => void) => () => void,
  look: () => Promise<ReadonlyMap<number, DoneRecord>>,
): Promise<DoneRecord[]> {
  return new Promise<DoneRecord[]>((resolve, reject) => {
    let busy = false, again = false, over = false;
    let latest: ReadonlyMap<number, DoneRecord> = new Map();
    const finish = (f: () => void) => {
      if (over) return;
      over = true;
      unsubscribe();
      clearTimeout(timer);
      signal?.removeEventListener("abort", aborted);
      f();
    };
    const check = async () => {
      if (busy) return void (again = true);
      busy = true;
      try {
        do {
          again = false;
          latest = await look();
          const failed = [...latest.values()].find((r) => r.error !== undefined);
          if (failed) {
            const why = `writer ${failed.writer} of ${writers} failed (${failed.error}); nothing was committed`;
            return finish(() => reject(new ShardWriterError(failed.writer, why)));
          }
          if (latest.size >= writers) {
            const all = Array.from({ length: writers }, (_, w) => latest.get(w)!);
            if (all.every((r) => r !== undefined)) return finish(() => resolve(all));
          }
        } while (again && !over);
      } catch (e) {
        finish(() => reject(e));
      } finally {
        busy = false;
      }
    };
    const aborted = () => finish(() => reject(signal!.reason));
    const timer = setTimeout(() => {
      const missing = Array.from({ length: writers }, (_, w) => w).filter((w) => !latest.has(w));
      finish(() => reject(new ShardDeadlineError("", missing, writers, deadline)));
    }, deadline);
    const unsubscribe = subscribe(() => void check());
    if (signal?.aborted) return aborted();
    signal?.addEventListener("abort", aborted, { once: true });
    void check();
  });
}
