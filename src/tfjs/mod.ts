/**
 * The TensorFlow.js adapter: copy training state out of tfjs into an isolated CPU
 * {@linkcode Checkpoint} ({@linkcode snapshot}), write it from a Web Worker while training goes
 * on ({@linkcode CheckpointWriter}), and load it back with a report of what matched
 * ({@linkcode restore}).
 *
 * Imported as `@ckpt/ckpt/tfjs`, apart from the core, so code that only moves bytes never loads
 * TensorFlow.js. It uses tfjs-core's public API only (the async `data()`, `clone()`, `assign()`,
 * optimizers' `getWeights()`/`setWeights()`), and was tested on the cpu, wasm and webgpu
 * backends; any backend that implements tfjs-core's API should work.
 *
 * @example
 * ```ts
 * import * as tf from "@tensorflow/tfjs";
 * import { restore, snapshot } from "./mod.ts";
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * tf.enableProdMode(); // Deno only looks like Node.js: no "install tfjs-node" banner
 * await tf.setBackend("cpu");
 * const build = () => {
 *   const model = tf.sequential({ layers: [tf.layers.dense({ name: "mod_fc", units: 1, inputShape: [3] })] });
 *   const optimizer = tf.train.adam(0.01);
 *   model.compile({ optimizer, loss: "meanSquaredError" });
 *   return { model, optimizer };
 * };
 * const a = build();
 * await a.model.trainOnBatch(tf.ones([4, 3]), tf.ones([4, 1]));
 * const path = await Deno.makeTempFile({ suffix: ".ckpt" });
 * await saveCheckpoint(path, await snapshot({ ...a, step: 1 }));
 *
 * const b = build();
 * const report = await restore(await loadCheckpoint(path), b);
 * assert.deepEqual(report.missing, []);
 * assert.equal(b.optimizer.iterations, 1);
 * await Deno.remove(path);
 * a.model.dispose();
 * b.model.dispose();
 * ```
 *
 * @module
 */
export type {
  Checkpoint,
  CheckpointInput,
  DType,
  JsonValue,
  Metadata,
  Tensor,
  TensorData,
  TensorInput,
} from "../format/types.ts";
export type { SaveOptions, SaveResult } from "../io/save.ts";
export type { CodecName, Compression, EncodeOptions } from "../format/encode.ts";
export type { WhenBusy, WriterPriority } from "../background/writer.ts";
export type { CheckpointEncoder, Codec } from "../format/codec.ts";
export type { CheckpointRecord } from "../format/types.ts";
export type { DecodeLimits } from "../format/limits.ts";
export type { CheckpointEntry } from "../manager/mod.ts";
export { beginSnapshot, snapshot, type SnapshotOptions } from "./snapshot.ts";
export { DEFAULT_MAX_FREE, StagingPool, type StagingPoolOptions } from "./staging_pool.ts";
export {
  CheckpointMismatchError,
  DEFAULT_ADAM_POWERS,
  type Mismatch,
  restore,
  type RestoreOptions,
  type RestoreReport,
  type TensorSpec,
} from "./restore.ts";
export {
  CheckpointWriter,
  type CheckpointWriterOptions,
  type FileWriter,
  type ManagerLike,
} from "./checkpoint_writer.ts";
export type { TfModel } from "./_slots.ts";
export { assertModelMatchesCheckpoint, type ModelMatchOptions } from "./testing.ts";
