import assert from "node:assert/strict";
import { CheckpointManager, readCheckpointIndex } from "../../mod.ts";
import { BackgroundWriter } from "../../src/background/writer.ts";
import { exact, makeCheckpoint, withDir } from "./_helpers.ts";

const quiet = { onWarning: () => {} };

Deno.test("a manager with compression bytegroup writes byte-grouped checkpoints that load back bit for bit", async () => {
  await withDir(async (dir) => {
    for (const writer of [undefined, new BackgroundWriter()]) {
      const sub = `${dir}/${writer ? "background" : "inline"}`;
      const manager = await CheckpointManager.open(sub, {
        compression: "bytegroup",
        ...quiet,
        ...(writer ? { writer } : {}),
      });
      const ckpt = makeCheckpoint(1, { frozen: 4096, trained: 4096 });
      // A BackgroundWriter transfers (detaches) the arrays it is given: save a copy.
      const entry = await manager.save(makeCheckpoint(1, { frozen: 4096, trained: 4096 }));
      await manager.close();
      await writer?.close();
      const index = await readCheckpointIndex(entry.path);
      assert.deepEqual(index.tensors.map((t) => t.encoding), ["bytegroup", "bytegroup", undefined, undefined]);
      const reopened = await CheckpointManager.open(sub, quiet);
      const back = await reopened.latest();
      assert.deepEqual(exact(back!.tensors), exact(ckpt.tensors as never));
      await reopened.close();
    }
  });
});

Deno.test("a manager refuses bytegroup where it cannot apply", async () => {
  await withDir(async (dir) => {
    for (
      const options of [{ compression: "bytegroup", incremental: true }, { compression: "bytegroup", codec: "json" }]
    ) {
      await assert.rejects(
        () => CheckpointManager.open(dir, options as never),
        TypeError,
        'compression "bytegroup" applies to full checkpoints in the binary codec',
      );
    }
  });
});
