/**
 * What `snapshot()` costs against copying the same bytes, for a tfjs-layers MLP with Adam on the
 * cpu backend (about 1.2 M parameters, 14 MiB with optimizer state):
 *
 * - baseline `copy`: read every weight and optimizer slot with `data()` and copy it into
 *   preallocated arrays (the least an isolated CPU copy can cost);
 * - `snapshot`: the adapter, allocating a fresh staging buffer each time;
 * - `snapshot (staging pool)`: the adapter reusing a released buffer, as `CheckpointWriter` does.
 *
 * Run: `deno bench --allow-read --allow-env bench/tfjs_snapshot_bench.ts`
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs-core";
import * as tfl from "@tensorflow/tfjs-layers";
import "@tensorflow/tfjs-backend-cpu";
import { snapshot, StagingPool } from "../src/tfjs/mod.ts";

tf.env().set("PROD", true);
await tf.setBackend("cpu");

const model = tfl.sequential({
  layers: [
    tfl.layers.dense({ name: "fc1", units: 1024, inputShape: [512], activation: "relu" }),
    tfl.layers.dense({ name: "fc2", units: 512, activation: "relu" }),
    tfl.layers.dense({ name: "out", units: 10 }),
  ],
});
const optimizer = tf.train.adam(1e-3);
model.compile({ optimizer, loss: "meanSquaredError" });
await model.trainOnBatch(tf.randomNormal([4, 512], 0, 1, "float32", 1), tf.randomNormal([4, 10], 0, 1, "float32", 2));

const tensors = [...model.weights.map((w) => w.read()), ...(await optimizer.getWeights()).map((w) => w.tensor)];
const targets = tensors.map((t) => new Float32Array(t.size));
const pool = new StagingPool();

Deno.bench("copy the same bytes out with data()", { group: "snapshot", baseline: true }, async () => {
  await Promise.all(tensors.map(async (t, i) => targets[i]!.set(await t.data() as Float32Array)));
});

Deno.bench("snapshot (fresh buffer)", { group: "snapshot" }, async () => {
  await snapshot({ model, optimizer, step: 1 });
});

Deno.bench("snapshot (staging pool)", { group: "snapshot" }, async () => {
  pool.release(await snapshot({ model, optimizer, step: 1, staging: pool }));
});
