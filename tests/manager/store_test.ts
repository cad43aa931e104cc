// The manager on object stores: in memory, and on a FileStore given as a store (no lock: the
// conditional commit alone keeps writers apart). The same suite runs on S3 in s3_test.ts.
import { MemoryStore } from "../../src/storage/memory.ts";
import { FileStore } from "../../src/storage/file.ts";
import { managerOnStore } from "./_store_suite.ts";
import assert from "node:assert/strict";
import { BackgroundWriter } from "../../src/background/writer.ts";
import type { TensorInput } from "../../src/format/types.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import type { CheckpointFileWriter } from "../../src/manager/options.ts";

managerOnStore("MemoryStore", () => Promise.resolve({ store: new MemoryStore(), close: () => Promise.resolve() }));

managerOnStore("FileStore", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-manager-store-" });
  return { store: new FileStore(dir), close: () => Deno.remove(dir, { recursive: true }) };
});

Deno.test("a manager on a store with an address takes a writer, which is given each object's address", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-manager-store-" });
  try {
    const given: string[] = [];
    await using background = new BackgroundWriter();
    const writer: CheckpointFileWriter = {
      save: (path, checkpoint, options) => {
        given.push(path);
        return background.save(
          path,
          { metadata: checkpoint.metadata, tensors: checkpoint.tensors as TensorInput[] },
          options,
        );
      },
    };
    const store = new FileStore(dir);
    const manager = await CheckpointManager.open(store, { writer, maxToKeep: 2 });
    for (const step of [1, 2, 3]) {
      await manager.save({
        metadata: { step },
        tensors: [{ name: "w", dtype: "float32", shape: [2], data: new Float32Array([step, step]) }],
      });
    }
    const listed = await manager.list();
    assert.deepEqual(listed.map((e) => e.step), [2, 3]);
    assert.equal(given.length, 3);
    assert.ok(given.every((p) => p.startsWith(store.url)), given.join(", "));
    assert.equal(given.at(-1), listed.at(-1)!.path);
    const latest = await manager.latest(); // verified against the digest the writer returned
    assert.deepEqual(latest!.tensors[0]!.data, new Float32Array([3, 3]));
    await manager.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a manager on a store without an address refuses a writer, saying why", async () => {
  const writer: CheckpointFileWriter = { save: () => Promise.reject(new Error("never called")) };
  await assert.rejects(
    CheckpointManager.open(new MemoryStore(), { writer }),
    (e) => e instanceof TypeError && /Invalid option writer: .* memory:\/\/.* has none/.test(e.message),
  );
});
