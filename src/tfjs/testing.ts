/**
 * `assertModelMatchesCheckpoint`: a tfjs model's weights against a checkpoint's, for tests.
 *
 * @module
 */
import type { CheckpointInput, TensorInput } from "../format/types.ts";
import { assertCheckpointEquals, type AssertCheckpointOptions, type CheckpointLike } from "../testing/assert.ts";
import { openSide } from "../testing/_open.ts";
import type { TfModel } from "./_slots.ts";
import { snapshot } from "./snapshot.ts";

/** Options for {@linkcode assertModelMatchesCheckpoint}. */
export interface ModelMatchOptions extends AssertCheckpointOptions {
  /**
   * Which groups to compare: `"params"` (trainable weights), plus `"buffers"` (batch-norm
   * statistics and other non-trainable weights) when asked.
   *
   * @default {["params"]}
   */
  groups?: readonly string[];
}

async function onlyGroups(x: CheckpointLike, groups: ReadonlySet<string>, where: string): Promise<CheckpointInput> {
  const side = await openSide(x, where);
  const tensors: TensorInput[] = [];
  const it = side.tensors();
  for (let r = await it.next(); !r.done; r = await it.next()) if (groups.has(r.value.group)) tensors.push(r.value);
  return { metadata: { step: 0 }, tensors };
}

/**
 * Asserts that a model's weights equal a checkpoint's, within the tolerances of
 * `assertCheckpointEquals` (names as {@linkcode snapshot} gives them, such as `"dense_1/kernel"`).
 * Only the chosen groups are compared; metadata is not.
 *
 * @example
 * ```ts
 * import * as tf from "@tensorflow/tfjs";
 * import { assertModelMatchesCheckpoint, snapshot } from "./mod.ts";
 * import assert from "node:assert/strict";
 * await tf.setBackend("cpu");
 * const model = tf.sequential({ layers: [tf.layers.dense({ name: "amm_fc", units: 1, inputShape: [2] })] });
 * const saved = await snapshot({ model, step: 1 });
 * await assertModelMatchesCheckpoint(model, saved);
 * model.setWeights([tf.ones([2, 1]), tf.zeros([1])]);
 * await assert.rejects(assertModelMatchesCheckpoint(model, saved), /amm_fc\/kernel/);
 * model.dispose();
 * ```
 */
export async function assertModelMatchesCheckpoint(
  model: TfModel,
  checkpoint: CheckpointLike,
  options: ModelMatchOptions = {},
): Promise<void> {
  const { groups: only, ...compare } = options;
  const groups = new Set(only ?? ["params"]);
  const actual = await onlyGroups(await snapshot({ model, step: 0 }), groups, "the model");
  const expected = await onlyGroups(checkpoint, groups, "the checkpoint");
  await assertCheckpointEquals(actual, expected, {
    ...compare,
    ignoreMetadata: ["step", "epoch", "createdAt", "metrics", "custom"],
  });
}
