// A checkpoint handed over as a Promise (`manager.save(snapshot(...))` without `await`) is
// recognised as one and the error says to await it, wherever a checkpoint is saved.
import assert from "node:assert/strict";
import { BackgroundWriter, CheckpointManager, encodeCheckpoint, saveCheckpoint } from "../../mod.ts";

const checkpoint = { metadata: { step: 1 }, tensors: [] };
const promised = () => Promise.resolve(checkpoint) as never;
const saysAwait = (context: string) => (e: unknown) => {
  assert.ok(e instanceof TypeError, String(e));
  assert.equal(
    e.message,
    `${context}: got a Promise, not a checkpoint; await it first (snapshot() returns a Promise: save(await snapshot(...)))`,
  );
  return true;
};

Deno.test("manager.save of a Promise says to await it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using manager = await CheckpointManager.open(dir);
    await assert.rejects(() => manager.save(promised()), saysAwait("Cannot save checkpoint"));
    assert.deepEqual(await manager.list(), [], "nothing was saved");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("saveCheckpoint, encodeCheckpoint and BackgroundWriter.save of a Promise say to await it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(() => saveCheckpoint(`${dir}/a.ckpt`, promised()), saysAwait("Cannot encode checkpoint"));
    await assert.rejects(
      () => new Response(encodeCheckpoint(promised())).arrayBuffer(),
      saysAwait("Cannot encode checkpoint"),
    );
    await using writer = new BackgroundWriter();
    assert.throws(
      () => writer.save(`${dir}/b.ckpt`, promised()),
      saysAwait("Cannot save checkpoint in the background"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
