/**
 * What a sharded checkpoint is made of in its store, and what failed saves left beside it: the
 * manager's retention deletes a checkpoint with {@linkcode deleteShardedCheckpoint} and cleans
 * up with {@linkcode removeShardLeftovers}.
 *
 * @module
 */
import type { StorageAddress, StoreObject } from "../storage/resolve.ts";
import { ObjectNotFoundError } from "../storage/types.ts";
import { locate, type StorageOptions } from "../io/read.ts";
import { files, readDirAll } from "../runtime/files.ts";
import { doneName } from "./errors.ts";
import type { ShardManifest } from "./manifest.ts";
import { readShardManifest } from "./read.ts";

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
export function shardKeys(key: string, manifest: ShardManifest): string[] {
  const prefix = `${key}.parts/${manifest.saveId}/`;
  const n = manifest.parts.length;
  return [key, ...manifest.parts.flatMap((p, i) => [prefix + p.name, prefix + doneName(i, n)])];
}

/** The committed manifest at `at`, or `undefined` when there is none (any other failure throws). */
async function committed(at: StoreObject, options: StorageOptions): Promise<ShardManifest | undefined> {
  try {
    return (await readShardManifest(at, options.storage ? { storage: options.storage } : {})).manifest;
  } catch (e) {
    if (e instanceof ObjectNotFoundError) return undefined;
    throw e;
  }
}

async function leftovers(at: StoreObject, options: StorageOptions): Promise<string[]> {
  const manifest = await committed(at, options);
  const keep = new Set(manifest ? shardKeys(at.key, manifest) : []);
  const out: string[] = [];
  for await (const o of at.store.list(`${at.key}.parts/`)) if (!keep.has(o.key)) out.push(o.key);
  return out;
}

/** On a local store, removes the empty directories left under `<key>.parts/` (the deepest first). */
async function pruneDirectories(at: StoreObject): Promise<void> {
  const local = at.store.files;
  if (!local) return;
  const top = local.path(`${at.key}.parts`);
  const prune = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await readDirAll(dir);
    } catch {
      return; // not there
    }
    for (const e of entries) if (e.isDirectory) await prune(`${dir}/${e.name}`);
    await files.remove(dir).catch(() => {}); // fails while not empty: kept
  };
  await prune(top);
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
export async function listShardLeftovers(address: StorageAddress, options: StorageOptions = {}): Promise<string[]> {
  return await leftovers(locate(address, options), options);
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
export async function removeShardLeftovers(address: StorageAddress, options: StorageOptions = {}): Promise<number> {
  const at = locate(address, options);
  const keys = await leftovers(at, options);
  for (const key of keys) await at.store.delete(key);
  await pruneDirectories(at);
  return keys.length;
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
export async function deleteShardedCheckpoint(address: StorageAddress, options: StorageOptions = {}): Promise<void> {
  const at = locate(address, options);
  await at.store.delete(at.key);
  const keys: string[] = [];
  for await (const o of at.store.list(`${at.key}.parts/`)) keys.push(o.key);
  for (const key of keys) await at.store.delete(key);
  await pruneDirectories(at);
}
