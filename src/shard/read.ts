/**
 * Reading a sharded checkpoint: the manifest first (validated before anything it names is
 * read), then only the records of the slices asked for, by positioned reads from local parts or
 * ranged GETs, each record checked against the digest the manifest pins before its rows are
 * handed out.
 *
 * @module
 */
import type { Checkpoint } from "../format/types.ts";
import type { StorageAddress } from "../storage/resolve.ts";
import type { StorageOptions } from "../io/read.ts";
import { SHARD_MAGIC, type ShardManifest, type ShardManifestLimits } from "./manifest.ts";
import { registerShardedLoader } from "../io/_sharded.ts";

/** Options for reading a sharded checkpoint. */
export interface ShardReadOptions extends StorageOptions {
  /**
   * Caps for the manifest.
   *
   * @default {undefined} (`DEFAULT_SHARD_LIMITS`)
   */
  limits?: ShardManifestLimits;
  /**
   * How many slice records to read at once.
   *
   * @default {4}
   */
  concurrency?: number;
}

/** Which part of a sharded checkpoint a reader wants. */
export interface ShardRequest {
  /** Whole tensors, by name. */
  tensors?: readonly string[];
  /**
   * Row ranges `[start, end)` of tensors along their first dimension; each comes back as a
   * tensor of that name whose shape has `end - start` rows.
   */
  rows?: readonly { tensor: string; start: number; end: number }[];
}

/**
 * Reads and validates the manifest at `address`: a `SyntaxError` for malformed bytes or a file
 * that is not a manifest, a `RangeError` past a cap, a `ChecksumMismatchError` when its trailer
 * does not match. `digest` is the sharded checkpoint's digest.
 *
 * @example
 * ```ts
 * import { readShardManifest, saveSharded } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const saved = await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) }],
 * });
 * const { manifest, digest } = await readShardManifest(`${dir}/a.ckpt`);
 * assert.equal(digest, saved.digest);
 * assert.equal(manifest.parts.length, 2);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function readShardManifest(
  _address: StorageAddress,
  _options: ShardReadOptions = {},
): Promise<{ manifest: ShardManifest; digest: string }> {
  throw new Error("not implemented");
}

/**
 * Reads only what `request` asks for from the sharded checkpoint at `address`: for each tensor
 * or row range, the records of the slices that hold it, each verified against the manifest's
 * digest before use. A row range inside one slice still reads (and hashes) that slice's whole
 * record, which its digest covers; only the rows asked for are returned. Tensors come in the
 * manifest's order, then row ranges in the order asked. An unknown tensor or a range outside the
 * tensor is a `RangeError`.
 *
 * @example
 * ```ts
 * import { readShards, saveSharded } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await saveSharded(`${dir}/a.ckpt`, {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "w", dtype: "uint8", shape: [4, 2], data: new Uint8Array([0, 1, 2, 3, 4, 5, 6, 7]) }],
 * }, { writers: 2, splitBytes: 1 });
 * const part = await readShards(`${dir}/a.ckpt`, { rows: [{ tensor: "w", start: 1, end: 3 }] });
 * assert.deepEqual(part.tensors[0]!.shape, [2, 2]);
 * assert.deepEqual([...part.tensors[0]!.data], [2, 3, 4, 5]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function readShards(
  _address: StorageAddress,
  _request: ShardRequest,
  _options: ShardReadOptions = {},
): Promise<Checkpoint> {
  throw new Error("not implemented");
}

/**
 * Reader `reader`'s share (0-based) of `readers`: whole tensors, balanced by bytes, the same on
 * every reader (a checkpoint written by N writers loads on any M readers). Pass it to
 * {@linkcode readShards}.
 *
 * @example
 * ```ts
 * import { shareOf } from "./read.ts";
 * import assert from "node:assert/strict";
 * const t = (name: string, n: number) => ({ name, dtype: "uint8" as const, shape: [n], group: "params",
 *   slices: [{ part: 0, rows: [0, n] as [number, number], offset: 64, length: 8, digest: "0".repeat(64) }] });
 * const manifest = { version: 1 as const, saveId: "s", commit: "0".repeat(32), metadata: { step: 0 },
 *   parts: [{ name: "part-00001-of-00001.ckpt", bytes: 4096, digest: "0".repeat(64) }],
 *   tensors: [t("a", 30), t("b", 20), t("c", 10)] };
 * assert.deepEqual(shareOf(manifest, 0, 2).tensors, ["a"]);
 * assert.deepEqual(shareOf(manifest, 1, 2).tensors, ["b", "c"]);
 * ```
 */
export function shareOf(_manifest: ShardManifest, _reader: number, _readers: number): ShardRequest {
  throw new Error("not implemented");
}

registerShardedLoader(SHARD_MAGIC, () => {
  throw new Error("not implemented");
});
