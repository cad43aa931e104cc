// One writer of a sharded save on a worker thread: posts { bytes, digest? } or { error }. With
// `channel`, writers coordinate over a BroadcastChannel instead of done records in the store.
import { channelCoordinator, saveShard } from "../../src/shard/mod.ts";
import { replica, SPLIT } from "./_fixture.ts";

const scope = self as unknown as Worker;
scope.onmessage = async (e: MessageEvent) => {
  const a = e.data;
  try {
    const r = await saveShard(a.address, replica(a.seed), {
      writer: a.writer,
      writers: a.writers,
      saveId: a.saveId,
      splitBytes: SPLIT,
      poll: 20,
      deadline: 60_000,
      ...(a.channel ? { coordinator: channelCoordinator(a.saveId) } : {}),
    });
    scope.postMessage({ bytes: r.part.bytes, digest: r.digest });
  } catch (err) {
    scope.postMessage({ error: String(err) });
  }
};
