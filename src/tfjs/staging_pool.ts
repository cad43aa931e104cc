/**
 * Reusable CPU staging memory for snapshots.
 *
 * @module
 */
import { checkOptionNames, optionNames } from "../format/_options.ts";
import type { CheckpointInput, TensorInput } from "../format/types.ts";
import { detach } from "./_read_back.ts";

/** Options for {@linkcode StagingPool}. */
export interface StagingPoolOptions {
  /**
   * How many free buffers the pool keeps for reuse; beyond that the least recently released
   * are dropped and left to the garbage collector. Two covers a snapshot being written while
   * the next one is taken.
   *
   * @default {2}
   */
  maxFree?: number;
}

/** Default of {@linkcode StagingPoolOptions.maxFree}. */
export const DEFAULT_MAX_FREE = 2;

/**
 * A pool of `ArrayBuffer`s that {@linkcode snapshot} stages tensors in, so that periodic
 * checkpoints of the same model reuse the same memory instead of allocating the whole model
 * every time (as PyTorch DCP keeps its pinned staging copy).
 *
 * A snapshot taken with a pool lays all its tensors out in one buffer. (Not on a backend whose
 * read-back hands out a fresh copy of each tensor, such as tfjs-node's `tensorflow`: there the
 * copies are the snapshot's arrays and the pool is not used.) That buffer belongs to
 * the checkpoint until you {@linkcode StagingPool.release} it; after that the next snapshot may
 * overwrite it, so release a checkpoint only once it is saved and no longer read. A buffer that
 * went to a worker and came back (a new `ArrayBuffer` object over the same memory) can be
 * released too. Without a pool, each snapshot allocates one fresh buffer.
 *
 * @example
 * ```ts
 * import * as tf from "@tensorflow/tfjs-core";
 * import "@tensorflow/tfjs-backend-cpu";
 * import { snapshot, StagingPool } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * tf.enableProdMode(); // Deno only looks like Node.js: no "install tfjs-node" banner
 * await tf.setBackend("cpu");
 * const w = tf.variable(tf.ones([256]), true, "staging_pool_example/w");
 * const pool = new StagingPool();
 * const first = await snapshot({ model: [w], step: 1, staging: pool });
 * pool.release(first);
 * const second = await snapshot({ model: [w], step: 2, staging: pool });
 * assert.equal(second.tensors[0]!.data.buffer, first.tensors[0]!.data.buffer);
 * assert.equal(pool.allocations, 1);
 * w.dispose();
 * ```
 */
export class StagingPool {
  #free: ArrayBuffer[] = [];
  #maxFree: number;
  #allocations = 0;
  #allocatedBytes = 0;
  /** The sizes handed out: no other size would ever be acquired again. */
  #sizes = new Set<number>();

  /**
   * Makes an empty pool.
   *
   * @param options How many free buffers to keep.
   */
  constructor(options: StagingPoolOptions = {}) {
    checkOptionNames(options, optionNames<StagingPoolOptions>()(["maxFree"]), "Cannot make a StagingPool");
    const maxFree = options.maxFree ?? DEFAULT_MAX_FREE;
    if (!Number.isSafeInteger(maxFree) || maxFree < 0) {
      throw new RangeError(`Invalid maxFree: ${maxFree}, expected a non-negative integer`);
    }
    this.#maxFree = maxFree;
  }

  /** How many buffers the pool has allocated since it was made. */
  get allocations(): number {
    return this.#allocations;
  }

  /** Bytes the pool has allocated since it was made. */
  get allocatedBytes(): number {
    return this.#allocatedBytes;
  }

  /** How many buffers are free for reuse now. */
  get free(): number {
    return this.#free.length;
  }

  /**
   * A buffer of exactly `byteLength` bytes: a free one of that size (the same model gives the
   * same size), or a new one. Exact sizes let a writer move the whole buffer to a worker
   * without copying. It is the caller's until released.
   */
  acquire(byteLength: number): ArrayBuffer {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new RangeError(`Cannot acquire staging buffer: ${byteLength} is not a byte length`);
    }
    this.#sizes.add(byteLength);
    const i = this.#free.findIndex((b) => b.byteLength === byteLength);
    if (i >= 0) return this.#free.splice(i, 1)[0]!;
    this.#allocations++;
    this.#allocatedBytes += byteLength;
    return new ArrayBuffer(byteLength);
  }

  /**
   * Gives buffers back for reuse: an `ArrayBuffer`, or every buffer under a checkpoint's
   * tensors or a tensor array (each buffer once). Detached buffers (moved away) and shared ones
   * are skipped; the most recently released are kept, up to `maxFree`. A buffer of a size the
   * pool never handed out, which no snapshot would take (a snapshot's own arrays on a backend
   * whose read-back copies, such as tfjs-node's), is freed at once (detached, where the runtime
   * can) rather than left to the garbage collector: given back, it is no longer read.
   */
  release(item: ArrayBuffer | CheckpointInput | readonly TensorInput[]): void {
    const buffers = new Set<ArrayBuffer>();
    const tensors = Array.isArray(item) ? item : (item as CheckpointInput)?.tensors;
    if (item instanceof ArrayBuffer) buffers.add(item);
    else if (Array.isArray(tensors)) {
      for (const t of tensors as TensorInput[]) {
        if (t?.data?.buffer instanceof ArrayBuffer) buffers.add(t.data.buffer);
      }
    } else {
      throw new TypeError("Cannot release: expected an ArrayBuffer or a checkpoint with a tensors array");
    }
    for (const b of buffers) {
      if (b.detached || b.byteLength === 0 || this.#free.includes(b)) continue;
      if (this.#sizes.has(b.byteLength)) this.#free.unshift(b);
      else detach(b);
    }
    this.#free.length = Math.min(this.#free.length, this.#maxFree);
  }
}
