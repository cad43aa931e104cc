// Coordination of a sharded save's writers and its committer: each writer announces its part
// with a done record once the part is durable; the committer collects every writer's record
// (or gives up at a deadline, naming the writers that did not finish). Two ways: in memory, for
// writers in one JS thread; through the store, for writers in other threads, processes or hosts
// (a done record is a small object beside the parts).
import type { ObjectStore } from "../storage/types.ts";
import type { DType, Metadata } from "../format/types.ts";
import type { ShardPart } from "./manifest.ts";

/** One slice a writer wrote, with where it lies in its part. */
export interface DoneSlice {
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
  throw new Error("not implemented");
}

/** A coordinator through `store`: done records are objects under `prefix` (which ends in `/`). */
export function storeCoordinator(_store: ObjectStore, _prefix: string, _url: string, _poll: number): ShardCoordinator {
  throw new Error("not implemented");
}
