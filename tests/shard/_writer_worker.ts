// One writer of a sharded save on a worker thread: posts { bytes, digest? } or { error }.
import { saveShard } from "../../src/shard/mod.ts";
import { replica, SPLIT } from "./_fixture.ts";

self.onmessage = async (e: MessageEvent) => {
  const a = e.data;
  try {
    const r = await saveShard(a.address, replica(a.seed), {
      writer: a.writer,
      writers: a.writers,
      saveId: a.saveId,
      splitBytes: SPLIT,
      poll: 20,
    });
    self.postMessage({ bytes: r.part.bytes, digest: r.digest });
  } catch (err) {
    self.postMessage({ error: String(err) });
  }
};
