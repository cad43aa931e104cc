// S3 crash test child: opens the manager on S3 through a store that stops dead at one point of
// the save of step 2 (printing `at POINT`), so the parent can SIGKILL it exactly there.
import { CheckpointManager } from "../../src/manager/mod.ts";
import { S3Store, type S3StoreOptions } from "../../src/storage/s3.ts";
import type { ObjectStore, ObjectWriter } from "../../src/storage/types.ts";
import { bigCheckpoint, PART_SIZE } from "./_s3_crash.ts";

const [config, point] = Deno.args as [string, "before-upload" | "mid-multipart" | "after-upload"];
const inner = new S3Store({ ...(JSON.parse(config) as S3StoreOptions), partSize: PART_SIZE, concurrency: 1 });
const stop = (): Promise<never> => {
  Deno.stdout.writeSync(new TextEncoder().encode(`at ${point}\n`));
  setInterval(() => {}, 60_000); // keeps the process alive until it is killed
  return new Promise<never>(() => {});
};
const isCheckpoint = (key: string) => key.startsWith("step-");

const store: ObjectStore = {
  url: inner.url,
  writable: true,
  get: (key, options) => inner.get(key, options),
  head: (key) => inner.head(key),
  put: (key, data, options) => inner.put(key, data, options),
  delete: (key) => inner.delete(key),
  list: (prefix) => inner.list(prefix),
  sweep: (prefix) => inner.sweep(prefix),
  async writer(key, options): Promise<ObjectWriter> {
    if (!isCheckpoint(key)) return await inner.writer(key, options);
    if (point === "before-upload") await stop();
    const w = await inner.writer(key, options);
    let written = 0;
    return {
      async write(chunk) {
        await w.write(chunk);
        written += chunk.byteLength;
        // With one part in flight, taking bytes past the second part means the first is stored.
        if (point === "mid-multipart" && written > 2 * PART_SIZE) await stop();
      },
      async close() {
        const info = await w.close();
        if (point === "after-upload") await stop();
        return info;
      },
      abort: (reason) => w.abort(reason),
    };
  },
};

const manager = await CheckpointManager.open(store, { onWarning: () => {} });
await manager.save(bigCheckpoint(2));
Deno.stdout.writeSync(new TextEncoder().encode("committed 2\n"));
