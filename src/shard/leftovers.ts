/**
 * What a sharded checkpoint is made of in its store, and what failed saves left beside it: the
 * manager's retention deletes a checkpoint with {@linkcode deleteShardedCheckpoint} and cleans
 * up with {@linkcode removeShardLeftovers}.
 *
 * @module
 */
import type { StorageAddress } from "../storage/resolve.ts";
import type { StorageOptions } from "../io/read.ts";
import type { ShardManifest } from "./manifest.ts";

/**
 * The keys, in the address's store, of everything the committed checkpoint with `manifest` at
 * `key` consists of: the manifest, its parts, and its save's done records.
 *
 * @example
 * ```ts
 * import { shardKeys } from "./leftovers.ts";
 * import assert from "node:assert/strict";
 * const manifest = { version: 1 as const, saveId: "s1", commit: "0".repeat(32), metadata: { step: 0 },
 *   parts: [{ name: "part-00001-of-00001.ckpt", bytes: 64, digest: "0".repeat(64) }], tensors: [] };
 * assert.deepEqual(shardKeys("run/a.ckpt", manifest), [
 *   "run/a.ckpt",
 *   "run/a.ckpt.parts/s1/part-00001-of-00001.ckpt",
 *   "run/a.ckpt.parts/s1/done-00001-of-00001.json",
 * ]);
 * ```
 */
export function shardKeys(_key: string, _manifest: ShardManifest): string[] {
  throw new Error("not implemented");
}

/**
 * The keys under `<address>.parts/` that the committed manifest at `address` does not name (all
 * of them when there is none): parts and done records of saves that never committed. Only
 * meaningful while no save to `address` is in progress (its parts look the same).
 *
 * @example
 * ```ts
 * import { listShardLeftovers, removeShardLeftovers } from "./leftovers.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await Deno.mkdir(`${dir}/a.ckpt.parts/s9`, { recursive: true });
 * await Deno.writeTextFile(`${dir}/a.ckpt.parts/s9/part-00001-of-00002.ckpt`, "x");
 * assert.deepEqual(await listShardLeftovers(`${dir}/a.ckpt`), ["a.ckpt.parts/s9/part-00001-of-00002.ckpt"]);
 * assert.equal(await removeShardLeftovers(`${dir}/a.ckpt`), 1);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function listShardLeftovers(_address: StorageAddress, _options: StorageOptions = {}): Promise<string[]> {
  throw new Error("not implemented");
}

/**
 * Deletes what {@linkcode listShardLeftovers} lists and says how many objects it deleted. Only
 * call it where no save to `address` is in progress.
 *
 * @example
 * ```ts
 * import { removeShardLeftovers } from "./leftovers.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * assert.equal(await removeShardLeftovers(`${dir}/none.ckpt`), 0);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function removeShardLeftovers(_address: StorageAddress, _options: StorageOptions = {}): Promise<number> {
  throw new Error("not implemented");
}

/**
 * Deletes the sharded checkpoint at `address`: the manifest first (so it stops existing at
 * once), then its parts, done records and any leftovers. A crash part way leaves only
 * leftovers, which {@linkcode removeShardLeftovers} removes.
 *
 * @example
 * ```ts
 * import { deleteShardedCheckpoint, saveSharded } from "./mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await saveSharded(`${dir}/a.ckpt`, { metadata: { step: 1 }, tensors: [] });
 * await deleteShardedCheckpoint(`${dir}/a.ckpt`);
 * assert.deepEqual([...Deno.readDirSync(dir)], []);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export function deleteShardedCheckpoint(_address: StorageAddress, _options: StorageOptions = {}): Promise<void> {
  throw new Error("not implemented");
}
