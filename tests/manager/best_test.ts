// manager.best() and bestStep(): the best committed checkpoint by a metric, as Orbax's
// best_step(), by the manager's own rule or one given; checkpoints without the metric or with
// NaN never count, ties go to the newer step, and a missing rule is a TypeError saying how to give one.
import assert from "node:assert/strict";
import { CheckpointManager } from "../../mod.ts";

async function withManager(
  options: Parameters<typeof CheckpointManager.open>[1],
  fn: (m: CheckpointManager, dir: string) => Promise<void>,
) {
  const dir = await Deno.makeTempDir();
  const manager = await CheckpointManager.open(dir, options);
  try {
    await fn(manager, dir);
  } finally {
    await manager.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const save = (m: CheckpointManager, step: number, metrics: Record<string, number>) =>
  m.save({
    metadata: { step, metrics },
    tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([step]) }],
  });

Deno.test("best() loads the checkpoint with the best metric by the manager's rule", async () => {
  await withManager({ maxToKeep: 2, best: { metric: "val_loss", mode: "min" } }, async (m) => {
    assert.equal(await m.bestStep(), undefined, "nothing saved yet");
    assert.equal(await m.best(), undefined);
    await save(m, 1, { val_loss: 0.9 });
    await save(m, 2, { val_loss: 0.2 });
    await save(m, 3, { val_loss: NaN });
    await save(m, 4, { acc: 0.5 });
    await save(m, 5, { val_loss: 0.4 });
    assert.equal(await m.bestStep(), 2, "kept by retention as the best, and found");
    const best = await m.best();
    assert.equal(best?.metadata.step, 2);
    assert.deepEqual([...best!.tensors[0]!.data], [2]);
  });
});

Deno.test("bestStep() ranks by a metric given, max or min, ties to the newer step", async () => {
  await withManager({}, async (m) => {
    await save(m, 1, { acc: 0.7, loss: 0.3 });
    await save(m, 2, { acc: 0.8, loss: 0.3 });
    await save(m, 3, { acc: 0.8, loss: 0.5 });
    assert.equal(await m.bestStep({ metric: "acc", mode: "max" }), 3);
    assert.equal(await m.bestStep({ metric: "loss", mode: "min" }), 2);
    assert.equal(await m.bestStep({ metric: "absent", mode: "min" }), undefined);
    assert.equal((await m.best({ metric: "acc", mode: "min" }))?.metadata.step, 1);
  });
});

Deno.test("best() without a rule or with a bad one is a TypeError saying what to pass", async () => {
  await withManager({}, async (m) => {
    await save(m, 1, { loss: 1 });
    await assert.rejects(
      () => m.best(),
      /^TypeError: Cannot find the best checkpoint: no metric to rank by; pass \{ metric, mode \} or open the manager with best: \{ metric, mode \}$/,
    );
    await assert.rejects(() => m.bestStep({ metric: "loss", mode: "lowest" } as never), /mode must be "min" or "max"/);
    await assert.rejects(() => m.bestStep({ metric: "loss", mode: "min", keep: 2 } as never), /unknown option "keep"/);
  });
});

Deno.test("a read-only view ranks by the rule the writer recorded", async () => {
  await withManager({ best: { metric: "loss", mode: "min" } }, async (m, dir) => {
    await save(m, 1, { loss: 0.1 });
    await save(m, 2, { loss: 0.2 });
    const view = await CheckpointManager.open(dir, { readOnly: true });
    try {
      assert.equal(await view.bestStep(), 1);
    } finally {
      await view.close();
    }
  });
});
