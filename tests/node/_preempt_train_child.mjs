// A training loop with no timer in it, as issue 45 found one: `await model.trainOnBatch()` on
// tfjs's cpu backend (which resolves without leaving the microtask queue), a CheckpointWriter
// save every 100 steps, and `await preemption.poll(step)` at each step boundary. On SIGTERM or
// SIGINT it saves the step it is at, drains the writer and the manager, and exits 143 / 130;
// untold, it stops after 60 s and exits 0. Prints "step N" every 20 steps and "drained N S".
// Runs under Node (tests/node/preemption_test.mjs, the packed package) and under Deno
// (tests/manager/preemption_test.ts, "@ckpt/ckpt" mapped to this checkout).
//
//   node _preempt_train_child.mjs <dir>
import process from "node:process";
import { writeSync } from "node:fs";
import * as tf from "@tensorflow/tfjs";
import { CheckpointManager, Preemption } from "@ckpt/ckpt";
import { CheckpointWriter } from "@ckpt/ckpt/tfjs";

const dir = process.argv.at(-1);
const say = (line) => writeSync(1, line + "\n");
tf.enableProdMode();
await tf.setBackend("cpu");
const model = tf.sequential({ layers: [tf.layers.dense({ units: 4, inputShape: [8] })] });
const optimizer = tf.train.adam(0.01);
model.compile({ optimizer, loss: "meanSquaredError" });
const [x, y] = [tf.ones([16, 8]), tf.zeros([16, 4])];

const preemption = Preemption.listen({ gracePeriod: 30_000 });
const writer = new CheckpointWriter();
const manager = await CheckpointManager.open(dir, { maxToKeep: 2, writer: writer.fileWriter });
const started = performance.now();
for (let step = 1; performance.now() - started < 60_000; step++) {
  await model.trainOnBatch(x, y);
  if (step % 20 === 0) say(`step ${step}`);
  const stopping = await preemption.poll(step);
  if (step % 100 === 0 || stopping) writer.save(manager, { model, optimizer, step });
  if (stopping) await preemption.stop([writer, manager], { onDrained: (s) => say(`drained ${step} ${s}`) });
}
say("not stopped");
await writer.close();
await manager.close();
