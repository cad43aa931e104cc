// The Node training child: a small TF.js model (pure JS @tensorflow/tfjs, cpu backend) trained
// deterministically (seeded initializers, data that depends on the step alone), checkpointed
// through a CheckpointWriter (a worker thread writes) into a CheckpointManager every `every`
// steps, resuming from the newest checkpoint when there is one. Prints `committed <step>` once a
// save is committed, and at the end `final <sha256 of every weight and optimizer variable>`.
//
//   node _train_child.mjs <dir> <steps> <every> [delayMs]
import process from "node:process";
import { createHash } from "node:crypto";
import { writeSync } from "node:fs";
import * as tf from "@tensorflow/tfjs";
import { CheckpointManager } from "@ckpt/ckpt";
import { CheckpointWriter, restore } from "@ckpt/ckpt/tfjs";

const [dir, stepsArg, everyArg, delayArg] = process.argv.slice(2);
const steps = Number(stepsArg);
const every = Number(everyArg);
const delay = Number(delayArg ?? 0);
const say = (line) => writeSync(1, line + "\n");

tf.enableProdMode();
await tf.setBackend("cpu");

const init = (n) => tf.initializers.glorotUniform({ seed: 70 + n });
const model = tf.sequential({
  layers: [
    tf.layers.dense({ name: "h1", units: 16, inputShape: [4], activation: "tanh", kernelInitializer: init(1) }),
    tf.layers.dense({ name: "out", units: 1, kernelInitializer: init(2) }),
  ],
});
const optimizer = tf.train.momentum(0.05, 0.9);
model.compile({ optimizer, loss: "meanSquaredError" });

/** The batch of a step: a function of the step alone, so a resumed run sees what it would have. */
function batch(step) {
  const x = new Float32Array(8 * 4).map((_, i) => Math.sin(step * 13 + i * 0.7));
  const y = new Float32Array(8).map((_, i) => Math.cos(step * 5 + i));
  return [tf.tensor2d(x, [8, 4]), tf.tensor2d(y, [8, 1])];
}

const writer = new CheckpointWriter();
const manager = await CheckpointManager.open(dir, { maxToKeep: 3, writer: writer.fileWriter, onWarning: () => {} });
let start = 0;
const latest = await manager.latest();
if (latest) {
  await restore(latest, { model, optimizer });
  start = latest.metadata.step;
}
say(`start ${start}`);
for (let step = start + 1; step <= steps; step++) {
  const [x, y] = batch(step);
  await model.trainOnBatch(x, y);
  tf.dispose([x, y]);
  if (step % every === 0) writer.save(manager, { model, optimizer, step }).then(() => say(`committed ${step}`));
  if (delay) await new Promise((r) => setTimeout(r, delay));
}
await writer.close();
await manager.close();
const h = createHash("sha256");
for (const w of [...model.getWeights(), ...(await optimizer.getWeights()).map((v) => v.tensor)]) {
  const d = await w.data();
  h.update(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
}
say(`final ${h.digest("hex")}`);
