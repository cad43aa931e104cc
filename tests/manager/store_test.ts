// The manager on object stores: in memory, and on a FileStore given as a store (no lock: the
// conditional commit alone keeps writers apart). The same suite runs on S3 in s3_test.ts.
import { MemoryStore } from "../../src/storage/memory.ts";
import { FileStore } from "../../src/storage/file.ts";
import { managerOnStore } from "./_store_suite.ts";

managerOnStore("MemoryStore", () => Promise.resolve({ store: new MemoryStore(), close: () => Promise.resolve() }));

managerOnStore("FileStore", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-manager-store-" });
  return { store: new FileStore(dir), close: () => Deno.remove(dir, { recursive: true }) };
});
