// Sharded kill test child: one writer of a 2-writer manager save of step 2, through a store that
// prints `req N KEY` before each request that changes the store and, at request `stopAt`, prints
// `at N` and hangs there, so the parent can SIGKILL it exactly at that point of the save. The
// committer says `opened` once its manager is open; the parent starts the other writer then.
import { CheckpointManager, saveManagedShard } from "../../src/manager/mod.ts";
import type { ObjectStore } from "../../src/storage/types.ts";
import { makeCheckpoint } from "./_helpers.ts";
import { SAVE_ID, storeOf, type Target, TRAINED } from "./_sharded_kill.ts";

const [role, target, stopAtText] = Deno.args as ["committer" | "writer", string, string];
const stopAt = Number(stopAtText);
const inner = storeOf(JSON.parse(target) as Target);
const say = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));
let requests = 0;
const gate = async (key: string): Promise<void> => {
  requests++;
  say(`req ${requests} ${key}`);
  if (requests === stopAt) {
    say(`at ${requests}`);
    setInterval(() => {}, 60_000); // alive until killed
    await new Promise<never>(() => {});
  }
};
const store: ObjectStore = {
  url: inner.url,
  writable: true,
  get: (key, options) => inner.get(key, options),
  head: (key) => inner.head(key),
  list: (prefix) => inner.list(prefix),
  async put(key, data, options) {
    await gate(key);
    return await inner.put(key, data, options);
  },
  async delete(key) {
    await gate(key);
    return await inner.delete(key);
  },
  async writer(key, options) {
    await gate(key);
    return await inner.writer(key, options);
  },
  ...(inner.sweep ? { sweep: (prefix?: string) => inner.sweep!(prefix) } : {}),
};
const checkpoint = makeCheckpoint(2, { trained: TRAINED });
if (role === "committer") {
  // maxToKeep 1: the commit is followed by retention deleting step 1 (manifest first, then its parts).
  const manager = await CheckpointManager.open(store, { maxToKeep: 1, onWarning: () => {} });
  say("opened"); // the other writer starts now: an open cleans up every uncommitted part
  await manager.save(checkpoint, { shards: { writers: 2, saveId: SAVE_ID, external: true, deadline: 8000, poll: 20 } });
  await manager.close();
  say("committed");
} else {
  await saveManagedShard(store, checkpoint, { writer: 1, writers: 2, saveId: SAVE_ID });
  say("written");
}
