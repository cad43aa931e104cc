// Child of tfjs_node_test.mjs, run by Node in a project where `npm install` put @ckpt/ckpt and
// @tensorflow/tfjs-node side by side (one tfjs-core), the binding built by setup:native. Trains on
// the native backend, checkpoints, restores across tensorflow and cpu, and prints what it found.
import { createRequire } from "node:module";
import { installNodeUtilShim } from "@ckpt/ckpt/tfjs-node-shim";
import { restore, snapshot } from "@ckpt/ckpt/tfjs";
import { loadCheckpoint, saveCheckpoint } from "@ckpt/ckpt";

const require = createRequire(import.meta.url);
const shimAdded = installNodeUtilShim(); // Node 20 still has both functions: nothing to add
const tf = require("@tensorflow/tfjs-node");
tf.env().set("PROD", true);

function build(seed) {
  const model = tf.sequential({
    layers: [
      tf.layers.dense({
        name: "fc1",
        units: 16,
        inputShape: [4],
        activation: "relu",
        kernelInitializer: tf.initializers.glorotUniform({ seed }),
      }),
      tf.layers.dense({ name: "fc2", units: 1, kernelInitializer: tf.initializers.glorotUniform({ seed: seed + 1 }) }),
    ],
  });
  const optimizer = tf.train.adam(0.01);
  model.compile({ optimizer, loss: "meanSquaredError" });
  return { model, optimizer };
}

async function train(model, from, to) {
  const losses = [];
  for (let step = from; step < to; step++) {
    const x = tf.randomNormal([16, 4], 0, 1, "float32", 100 + step);
    const y = tf.tidy(() => x.sum(1, true).sin());
    losses.push(await model.trainOnBatch(x, y));
    tf.dispose([x, y]);
  }
  return losses;
}

/** The checkpoint's bytes and SHA-256, through streams (no files). */
async function encode(checkpoint) {
  const chunks = [];
  const sink = new WritableStream({ write: (c) => void chunks.push(c.slice()) });
  const { sha256 } = await saveCheckpoint(sink, checkpoint, { sha256sum: true });
  return { bytes: new Blob(chunks), sha256 };
}

async function trainedOn(backend) {
  await tf.setBackend(backend);
  const s = build(1);
  await train(s.model, 0, 8);
  return { ...s, saved: await encode(await snapshot({ ...s, step: 8 })) };
}

async function restoredOn(backend, saved) {
  await tf.setBackend(backend);
  const s = build(50);
  const report = await restore(await loadCheckpoint(saved.bytes, { sha256: saved.sha256 }), {
    ...s,
    adamPowers: "replay",
  });
  return { ...s, report, again: await encode(await snapshot({ ...s, step: 8 })) };
}

const out = { shimAdded, backend: tf.getBackend(), tensorflow: tf.backend().binding.TF_Version, crossings: [] };
for (const [from, to] of [["tensorflow", "cpu"], ["cpu", "tensorflow"], ["tensorflow", "tensorflow"]]) {
  const a = await trainedOn(from);
  const b = await restoredOn(to, a.saved);
  const crossing = {
    from,
    to,
    sha256: a.saved.sha256,
    restoredSha256: b.again.sha256,
    missing: b.report.missing.length + b.report.unexpected.length + b.report.mismatched.length,
  };
  if (from === to) {
    // Resuming on the same backend: the next steps are the uninterrupted run's, bit for bit.
    await tf.setBackend(from);
    crossing.resumedExactly = JSON.stringify(await train(b.model, 8, 14)) ===
      JSON.stringify(await train(a.model, 8, 14));
  }
  out.crossings.push(crossing);
  a.model.dispose();
  b.model.dispose();
}
console.log(JSON.stringify(out));
