/**
 * Copying training state out of TensorFlow.js into an isolated CPU checkpoint.
 *
 * @module
 */
import { checkOptionNames, optionNames } from "../format/_options.ts";
import { engine, type Optimizer, type Tensor, type Variable } from "@tensorflow/tfjs-core";
import type { Checkpoint, DType, JsonValue, Metadata, Tensor as CheckpointTensor } from "../format/types.ts";
import { DTYPES, elementCount } from "../format/dtype.ts";
import { validateMetadata } from "../format/metadata.ts";
import { reserveHeadroom } from "../format/_headroom.ts";
import { hasWebDigest } from "../format/_hash.ts";
import { prefixRoom } from "../format/codecs/binary.ts";
import { StagingPool } from "./staging_pool.ts";
import { backendCopies, readBackInto, readBackOwned, type StagedArray } from "./_read_back.ts";
import {
  checkpointDType,
  modelSlots,
  type NamedTensor,
  OPTIMIZER_GROUP,
  optimizerTensorName,
  type TfModel,
} from "./_slots.ts";

/** Options for {@linkcode snapshot}: what to capture and the metadata to go with it. */
export interface SnapshotOptions {
  /**
   * What to capture: a `tf.LayersModel` (every weight, trainable in group `"params"` and
   * non-trainable such as batch-norm moving statistics in `"buffers"`, named by the weight's
   * `originalName` such as `"dense_1/kernel"`), an array of `tf.Variable` (named by
   * `variable.name`), or an object of named tensors (named by key).
   */
  model: TfModel;
  /**
   * An optimizer whose state to capture in group `"optimizer"`: whatever its `getWeights()`
   * gives (the iteration counter as `"optimizer/iter"`, then Adam's moments, RMSProp's mean
   * squares, momentum accumulators...), renamed after the model's stable weight names.
   * Optimizers whose `getWeights()` is not implemented (tfjs Adamax) are refused.
   */
  optimizer?: Optimizer;
  /** Training step, stored as `metadata.step`. */
  step: number;
  /** Training epoch, stored as `metadata.epoch`. */
  epoch?: number;
  /**
   * Named numbers such as the loss, stored as `metadata.metrics`. A one-element array stands
   * for its number, so the loss of `await model.trainOnBatch(x, y)` (typed `number | number[]`)
   * goes in as it comes; an array of another length is a `TypeError` (a model compiled with
   * metrics gives `[loss, ...metrics]`: name each).
   */
  metrics?: Record<string, number | number[]>;
  /** Free-form JSON values, stored as `metadata.custom`. */
  custom?: Record<string, JsonValue>;
  /**
   * Where to stage the copy. With a pool, the snapshot's tensors are views into one buffer
   * taken from the pool, to be given back with `pool.release(checkpoint)` once saved; without
   * one, a fresh buffer is allocated. Not used on a backend whose read-back hands out a fresh
   * copy (tensorflow, wasm): those copies are the snapshot's arrays.
   *
   * @default {undefined}
   */
  staging?: StagingPool;
}

interface Pending {
  name: string;
  group: string;
  dtype: DType;
  shape: number[];
  /** A clone (same data, one more reference) taken at the time of the call. */
  held: Tensor;
}

const ACTION = "snapshot";

function pending(name: string, group: string, held: Tensor): Pending {
  return { name, group, dtype: checkpointDType(held.dtype, name, ACTION), shape: held.shape.slice(), held };
}

/** `metrics` with each one-element array replaced by its number (the rest is left to validateMetadata). */
function plainMetrics(metrics: Record<string, number | number[]>): Record<string, number> {
  if (typeof metrics !== "object" || metrics === null || Array.isArray(metrics)) {
    return metrics as Record<string, number>;
  }
  return Object.fromEntries(
    Object.entries(metrics).map(([name, value]): [string, number] => {
      if (!Array.isArray(value)) return [name, value];
      if (value.length === 1) return [name, value[0]!];
      throw new TypeError(
        `Cannot snapshot: metrics.${name} is an array of ${value.length} numbers, expected a number or one: name each (a model compiled with metrics gives trainOnBatch's [loss, ...metrics])`,
      );
    }),
  );
}

const SNAPSHOT_OPTION_NAMES = optionNames<SnapshotOptions>()([
  "model",
  "optimizer",
  "step",
  "epoch",
  "metrics",
  "custom",
  "staging",
]);

/**
 * Copies a model's weights (and optionally its optimizer's state) to CPU memory as a
 * {@linkcode Checkpoint}, ready for `saveCheckpoint` or a background writer.
 *
 * The snapshot holds the values as of the call, even when training steps run while its data is
 * still being read back from the device: every tensor is cloned synchronously before the
 * function returns its promise (a tfjs clone shares the data and keeps it alive; `assign` swaps
 * a variable's data rather than writing into it), then read back with the asynchronous
 * `data()` (which also works on WebGPU, where `dataSync()` does not) and copied, because the
 * cpu backend hands out its own arrays; where a backend hands out a fresh copy instead
 * (tensorflow, wasm), that copy becomes the snapshot's array as it is, unstaged and not copied
 * again (`staging` is then not used), so the state is neither copied nor held twice. For the optimizer, every registered variable is held
 * the same way before `getWeights()` is called, which covers the tfjs-core optimizers (they
 * list their state synchronously).
 *
 * Names are stable and unique: see {@linkcode SnapshotOptions.model}. Optimizer state is named
 * `optimizer/<weight name>/<slot>` (such as `optimizer/dense_1/kernel/m`) in the order
 * `getWeights()` gives it, which `restore` relies on. Only float32, int32 and bool tensors
 * can be captured (tfjs's `complex64` and `string` are refused with a `TypeError`).
 *
 * @example
 * ```ts
 * import * as tf from "@tensorflow/tfjs";
 * import { snapshot } from "./mod.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * tf.enableProdMode(); // Deno only looks like Node.js: no "install tfjs-node" banner
 * await tf.setBackend("cpu");
 * const model = tf.sequential({ layers: [tf.layers.dense({ name: "snap_fc", units: 1, inputShape: [2] })] });
 * const optimizer = tf.train.adam(0.1);
 * model.compile({ optimizer, loss: "meanSquaredError" });
 * await model.trainOnBatch(tf.ones([4, 2]), tf.zeros([4, 1]));
 *
 * const checkpoint = await snapshot({ model, optimizer, step: 1, metrics: { loss: 0.5 } });
 * assert.deepEqual(checkpoint.tensors.map((t) => t.name), [
 *   "snap_fc/kernel", "snap_fc/bias",
 *   "optimizer/iter", "optimizer/snap_fc/kernel/m", "optimizer/snap_fc/bias/m",
 *   "optimizer/snap_fc/kernel/v", "optimizer/snap_fc/bias/v",
 * ]);
 * const path = await Deno.makeTempFile({ suffix: ".ckpt" });
 * await saveCheckpoint(path, checkpoint);
 * await Deno.remove(path);
 * model.dispose();
 * ```
 */
export function snapshot(options: SnapshotOptions): Promise<Checkpoint> {
  try {
    return beginSnapshot(options);
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * {@linkcode snapshot}, throwing bad arguments synchronously: everything here runs before the
 * caller's next training step can, which is what makes the snapshot hold the values as of the
 * call. The returned promise only reads back and copies.
 */
export function beginSnapshot(options: SnapshotOptions): Promise<Checkpoint> {
  return holdSnapshot(options).done;
}

/** A snapshot whose values are held (see {@linkcode holdSnapshot}): its metadata now, its tensors to come. */
export interface HeldSnapshot {
  /** The checkpoint's metadata, checked. */
  metadata: Metadata;
  /** The checkpoint, once every tensor is read back. */
  done: Promise<Checkpoint>;
}

/**
 * {@linkcode beginSnapshot}, with the metadata at once and, where the backend hands out a copy
 * on every read (tensorflow, wasm; not in a page), each tensor given to `onTensor` as soon as it
 * is read back, in the checkpoint's order (those not given come with `done` only). A consumer
 * may move a given tensor's buffer away: `done`'s checkpoint then holds it detached.
 */
export function holdSnapshot(
  options: SnapshotOptions,
  onTensor?: (tensor: CheckpointTensor) => void,
): HeldSnapshot {
  const held: Tensor[] = [];
  try {
    if (typeof options !== "object" || options === null) throw new TypeError("Cannot snapshot: options are required");
    checkOptionNames(options, SNAPSHOT_OPTION_NAMES, "Cannot snapshot");
    const metadata: Metadata = { step: options.step };
    if (options.epoch !== undefined) metadata.epoch = options.epoch;
    if (options.metrics !== undefined) metadata.metrics = plainMetrics(options.metrics);
    if (options.custom !== undefined) metadata.custom = structuredClone(options.custom);
    validateMetadata(metadata);
    if (options.staging !== undefined && !(options.staging instanceof StagingPool)) {
      throw new TypeError("Cannot snapshot: staging must be a StagingPool");
    }
    const slots = modelSlots(options.model, ACTION);
    const items: Pending[] = [];
    const byVariable = new Map<Tensor, Tensor>();
    for (const s of slots) {
      const clone = s.tensor.clone();
      held.push(clone);
      byVariable.set(s.tensor, clone);
      items.push(pending(s.name, s.group, clone));
    }
    let optimizerWeights: Promise<NamedTensor[]> | undefined;
    const stableByRegistered = new Map<string, string>();
    if (options.optimizer !== undefined) {
      const optimizer = options.optimizer;
      if (typeof optimizer?.getWeights !== "function") {
        throw new TypeError("Cannot snapshot: optimizer has no getWeights() method");
      }
      for (const s of slots) if (s.registeredName !== undefined) stableByRegistered.set(s.registeredName, s.name);
      const variables = engine().registeredVariables as Record<string, Variable>;
      for (const v of Object.values(variables)) {
        if (byVariable.has(v) || v.isDisposed) continue;
        const clone = v.clone();
        held.push(clone);
        byVariable.set(v, clone);
      }
      try {
        optimizerWeights = Promise.resolve(optimizer.getWeights());
      } catch (e) {
        optimizerWeights = Promise.reject(e);
      }
    }
    const done = readBack(
      metadata,
      items,
      held,
      byVariable,
      optimizerWeights,
      stableByRegistered,
      options.staging,
      onTensor,
    );
    return { metadata, done };
  } catch (e) {
    for (const t of held) t.dispose();
    throw e;
  }
}

async function readBack(
  metadata: Metadata,
  items: Pending[],
  held: Tensor[],
  byVariable: Map<Tensor, Tensor>,
  optimizerWeights: Promise<NamedTensor[]> | undefined,
  stableByRegistered: Map<string, string>,
  staging: StagingPool | undefined,
  onTensor: ((tensor: CheckpointTensor) => void) | undefined,
): Promise<Checkpoint> {
  let buffer: ArrayBuffer | undefined;
  try {
    if (optimizerWeights) {
      let weights: NamedTensor[];
      try {
        weights = await optimizerWeights;
      } catch (e) {
        throw new TypeError(`Cannot snapshot optimizer: ${(e as Error)?.message ?? e}`, { cause: e });
      }
      if (!Array.isArray(weights)) throw new TypeError("Cannot snapshot optimizer: getWeights() gave no array");
      weights.forEach((w, i) => {
        if (typeof w?.name !== "string" || typeof w.tensor?.clone !== "function") {
          throw new TypeError(`Cannot snapshot optimizer: getWeights()[${i}] is not a named tensor`);
        }
        let t = byVariable.get(w.tensor);
        if (!t) {
          // A variable made after the call (a custom optimizer's), held from now; or a tensor
          // made by getWeights() itself during the call (the iteration counter), ours to dispose.
          t = typeof (w.tensor as Variable).assign === "function" ? w.tensor.clone() : w.tensor;
          held.push(t);
        }
        items.push(pending(optimizerTensorName(w.name, i, stableByRegistered), OPTIMIZER_GROUP, t));
      });
    }
    const seen = new Set<string>();
    for (const it of items) {
      if (seen.has(it.name)) throw new TypeError(`Cannot snapshot: two tensors are named ${JSON.stringify(it.name)}`);
      seen.add(it.name);
    }
    if (!hasWebDigest() && await backendCopies()) {
      // The backend copies on every read: its copies become the snapshot's arrays, unstaged. (In a
      // page the staged layout below wins: its headroom lets a record be hashed by WebCrypto.)
      const tensors: CheckpointTensor[] = new Array(items.length);
      await readBackOwned(
        items,
        items.map((it) => DTYPES[it.dtype].array as StagedArray),
        items.map((it) => elementCount(it.shape, `tensor ${JSON.stringify(it.name)}`)),
        (i, data) => {
          const it = items[i]!;
          tensors[i] = { name: it.name, dtype: it.dtype, shape: it.shape, data, group: it.group };
          onTensor?.(tensors[i]!);
        },
      );
      return { metadata, tensors };
    }
    // One buffer for all tensors, so a writer can move it to a worker whole: the 4-byte dtypes
    // (float32, int32) first, then bool, which keeps every view aligned. In front of each
    // tensor, room for its record prefix (reserved for the encoder: in a page it lays the record
    // out whole there and hashes it with one WebCrypto call, without copying the tensor).
    const offsets: number[] = new Array(items.length);
    const rooms: number[] = new Array(items.length);
    let total = 0;
    for (const size of [4, 1]) {
      items.forEach((it, i) => {
        if (DTYPES[it.dtype].bytes !== size) return;
        rooms[i] = prefixRoom(it);
        offsets[i] = total + rooms[i]!;
        total = offsets[i]! + elementCount(it.shape, `tensor ${JSON.stringify(it.name)}`) * size;
      });
    }
    buffer = staging ? staging.acquire(total) : new ArrayBuffer(total);
    const target = buffer;
    const tensors: CheckpointTensor[] = items.map((it, i) => {
      const info = DTYPES[it.dtype];
      const data = new info.array(target, offsets[i]!, elementCount(it.shape));
      reserveHeadroom(data, rooms[i]!);
      return { name: it.name, dtype: it.dtype, shape: it.shape, data, group: it.group };
    });
    await readBackInto(items, tensors.map((t) => t.data as Float32Array | Int32Array | Uint8Array));
    return { metadata, tensors };
  } catch (e) {
    if (buffer && staging) staging.release(buffer);
    throw e;
  } finally {
    for (const t of held) if (!t.isDisposed) t.dispose();
    for (const t of byVariable.values()) if (!t.isDisposed) t.dispose();
  }
}
