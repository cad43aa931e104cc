// The one place loadCheckpoint hands an address to a layer above it: a sharded checkpoint's
// manifest (src/shard) is recognised by its first bytes and read by the loader that layer
// registers on import, so io never imports shard.
import type { Checkpoint } from "../format/types.ts";
import type { StoreObject } from "../storage/resolve.ts";

/** Loads the sharded checkpoint whose manifest is at `at`, with loadCheckpoint's options. */
export type ShardedLoader = (at: StoreObject, options: Record<string, unknown>) => Promise<Checkpoint>;

let loader: { magic: Uint8Array; load: ShardedLoader } | undefined;

/** Registers the loader of objects that start with `magic` (src/shard does, once). */
export function registerShardedLoader(magic: Uint8Array, load: ShardedLoader): void {
  loader = { magic, load };
}

/**
 * The checkpoint at `at` read by the registered loader when the object starts with its magic;
 * `undefined` (after reading at most the magic's length) for anything else or nothing there.
 */
export async function loadIfSharded(
  at: StoreObject,
  options: Record<string, unknown>,
): Promise<Checkpoint | undefined> {
  if (!loader) return undefined;
  const { magic, load } = loader;
  let head: Uint8Array;
  try {
    const got = await at.store.get(at.key, { range: { offset: 0, length: magic.byteLength } });
    head = new Uint8Array(await new Response(got.body).arrayBuffer());
  } catch {
    return undefined; // the load's own error says what is wrong, in its words
  }
  if (head.byteLength !== magic.byteLength || !magic.every((b, i) => head[i] === b)) return undefined;
  return await load(at, options);
}
