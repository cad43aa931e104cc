/**
 * Checkpoint assertions for `deno test`: {@linkcode assertCheckpointEquals} says which tensors
 * moved and by how much; {@linkcode assertCheckpointSnapshot} compares with a golden checkpoint
 * stored beside the test (`deno test -A -- --update` writes it).
 *
 * @example
 * ```ts
 * import { assertCheckpointEquals } from "./mod.ts";
 * await assertCheckpointEquals(
 *   { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([1]) }] },
 *   { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "float32", shape: [1], data: new Float32Array([1 + 1e-7]) }] },
 *   { rtol: 1e-6 },
 * );
 * ```
 *
 * @module
 */
import "../interop/read_codecs.ts"; // a checkpoint compared may be a safetensors file
export { assertCheckpointEquals, type AssertCheckpointOptions, type CheckpointLike } from "./assert.ts";
export { assertCheckpointSnapshot, type SnapshotAssertOptions, type SnapshotTestContext } from "./snapshot.ts";
export { AssertionError } from "./assertion_error.ts";
export {
  type CheckpointDiff,
  type ComparedTensors,
  DEFAULT_DIFF_BUFFER_BYTES,
  diffCheckpoints,
  type DiffOptions,
  type DiffSource,
  type MetadataChange,
  type NameTolerance,
  type TensorSummary,
} from "../compare/checkpoint_diff.ts";
export {
  type ElementValue,
  type EqualityOptions,
  type FirstDifference,
  type TensorDifference,
  type Tolerance,
} from "../compare/tensor_diff.ts";
