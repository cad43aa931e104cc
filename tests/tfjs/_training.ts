/**
 * Small deterministic models and training steps shared by the tfjs adapter tests.
 *
 * @module
 */
import * as tf from "@tensorflow/tfjs";

/** The optimizers whose state the adapter must round-trip, by a short name. */
export const OPTIMIZERS: Record<string, () => tf.Optimizer> = {
  sgd: () => tf.train.sgd(0.05),
  momentum: () => tf.train.momentum(0.05, 0.9),
  nesterov: () => tf.train.momentum(0.05, 0.9, true),
  rmsprop: () => tf.train.rmsprop(0.01, 0.9, 0.5),
  // tfjs 4.22's centered RMSProp computes sqrt(ms - (mg^2 + epsilon)), subtracting epsilon; a
  // negative epsilon gives the intended sqrt(ms - mg^2 + |epsilon|) and keeps it finite.
  rmspropCentered: () => tf.train.rmsprop(0.005, 0.9, 0.5, -1e-6, true),
  adagrad: () => tf.train.adagrad(0.1),
  adadelta: () => tf.train.adadelta(0.5, 0.95, 0.01),
  adam: () => tf.train.adam(0.01),
};

let models = 0;

/**
 * A dense → batch-norm → dense model with seeded initializers. Layer names are fixed (`fc1`,
 * `bn`, `fc2`) unless `unique` is set, so two models built alike share checkpoint names.
 */
export function buildModel(options: { hidden?: number; seed?: number } = {}): tf.LayersModel {
  const hidden = options.hidden ?? 8;
  const seed = options.seed ?? 1;
  models++;
  return tf.sequential({
    layers: [
      tf.layers.dense({
        name: "fc1",
        units: hidden,
        inputShape: [4],
        activation: "relu",
        kernelInitializer: tf.initializers.glorotUniform({ seed }),
        biasInitializer: tf.initializers.randomNormal({ seed: seed + 1, stddev: 0.1 }),
      }),
      tf.layers.batchNormalization({ name: "bn" }),
      tf.layers.dense({ name: "fc2", units: 1, kernelInitializer: tf.initializers.glorotUniform({ seed: seed + 2 }) }),
    ],
  });
}

/** A batch for step `step`: the same step always gives the same batch. */
export function batch(step: number): { x: tf.Tensor2D; y: tf.Tensor2D } {
  return tf.tidy(() => {
    const x = tf.randomNormal([16, 4], 0, 1, "float32", 1000 + step) as tf.Tensor2D;
    const y = x.matMul(tf.tensor2d([[0.5], [-1], [2], [0.25]])).add(0.1).sin() as tf.Tensor2D;
    return { x, y };
  });
}

/** Compiles `model` with `optimizer` (mean squared error). */
export function compile(model: tf.LayersModel, optimizer: tf.Optimizer): void {
  model.compile({ optimizer, loss: "meanSquaredError" });
}

/** Runs steps `from` to `to - 1` and returns their losses. */
export async function train(model: tf.LayersModel, from: number, to: number): Promise<number[]> {
  const losses: number[] = [];
  for (let step = from; step < to; step++) {
    const { x, y } = batch(step);
    losses.push(await model.trainOnBatch(x, y) as number);
    x.dispose();
    y.dispose();
  }
  return losses;
}

/** Every weight's values, read back now, by `originalName`. */
export async function weightValues(model: tf.LayersModel): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const w of model.weights) out.set(w.originalName, (await w.read().data()).slice() as Float32Array);
  return out;
}

/** The optimizer's state, read back now, by tfjs name. */
export async function optimizerValues(optimizer: tf.Optimizer): Promise<Map<string, tf.TypedArray>> {
  const out = new Map<string, tf.TypedArray>();
  for (const w of await optimizer.getWeights()) out.set(w.name, (await w.tensor.data()).slice() as tf.TypedArray);
  return out;
}

/** How many models were built (for debugging name clashes). */
export function modelsBuilt(): number {
  return models;
}
