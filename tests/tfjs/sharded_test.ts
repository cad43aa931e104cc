// Data-parallel workers with full replicas split each save between them (each writes its planned
// share, every tensor once), and the checkpoint restores on any number of workers, bit for bit.
import * as tf from "@tensorflow/tfjs";
import assert from "node:assert/strict";
import { restore, snapshot } from "../../src/tfjs/mod.ts";
import { CheckpointManager, saveManagedShard } from "../../src/manager/mod.ts";
import { readShardManifest } from "../../src/shard/read.ts";
import { withDir } from "../manager/_helpers.ts";
import { buildModel, compile, OPTIMIZERS, optimizerValues, train, weightValues } from "./_training.ts";

tf.env().set("PROD", true);
await tf.setBackend("cpu");

function bits(values: Map<string, ArrayLike<number>>): [string, number[]][] {
  return [...values].map(([k, v]) => [k, Array.from(new Uint32Array(new Float32Array(v).buffer))]);
}

/** The optimizer's state bit for bit, in its order (tfjs suffixes its variable names per model: `fc1/kernel_3/m`). */
const slotBits = (values: Map<string, ArrayLike<number>>) => bits(values).map(([, v]) => v);

Deno.test("3 data-parallel replicas save one sharded checkpoint, each its share; 1 and 4 workers restore it bit for bit", async () => {
  await withDir(async (dir) => {
    // Three replicas trained alike: what data-parallel workers hold after each all-reduced step.
    const replicas = [];
    for (let w = 0; w < 3; w++) {
      const model = buildModel({ hidden: 96 });
      const optimizer = OPTIMIZERS.adam!();
      compile(model, optimizer);
      await train(model, 0, 3);
      replicas.push({ model, optimizer });
    }
    const manager = await CheckpointManager.open(dir);
    const saveId = "step-3-run-a";
    const shards = { writers: 3, saveId, external: true, poll: 20, splitBytes: 4096 };
    const [entry] = await Promise.all(replicas.map(async ({ model, optimizer }, w) => {
      const checkpoint = await snapshot({ model, optimizer, step: 3 });
      if (w === 0) return await manager.save(checkpoint, { shards });
      await saveManagedShard(dir, checkpoint, { writer: w, writers: 3, saveId, splitBytes: 4096 });
      return undefined;
    }));
    // Each tensor's rows written once in all, and every writer wrote a share of the data.
    const { manifest } = await readShardManifest(entry!.path);
    const want = await snapshot({ model: replicas[0]!.model, optimizer: replicas[0]!.optimizer, step: 3 });
    assert.deepEqual(manifest.tensors.map((t) => t.name).sort(), want.tensors.map((t) => t.name).sort());
    for (const t of manifest.tensors) {
      const rows = t.shape.length === 0 ? 1 : t.shape[0]!;
      assert.equal(t.slices.reduce((n, s) => n + s.rows[1] - s.rows[0], 0), rows, t.name);
    }
    const bytes = manifest.parts.map((p) => p.bytes);
    assert.ok(Math.max(...bytes) < 2 * Math.min(...bytes), `parts balanced: ${bytes.join(", ")}`);
    const expectedWeights = bits(await weightValues(replicas[0]!.model));
    const expectedSlots = slotBits(await optimizerValues(replicas[0]!.optimizer));
    // Restored on 1 worker and on 4: each loads the checkpoint whole and restores it.
    for (const workers of [1, 4]) {
      for (let w = 0; w < workers; w++) {
        const view = await CheckpointManager.open(dir, { readOnly: true });
        const model = buildModel({ hidden: 96 });
        const optimizer = OPTIMIZERS.adam!();
        compile(model, optimizer);
        await restore((await view.latest())!, { model, optimizer });
        await view.close();
        assert.deepEqual(bits(await weightValues(model)), expectedWeights, `${workers} workers, worker ${w}`);
        assert.deepEqual(slotBits(await optimizerValues(optimizer)), expectedSlots, `${workers} workers, worker ${w}`);
        model.dispose();
      }
    }
    await manager.close();
    for (const { model } of replicas) model.dispose();
  });
});
