// What the sharded-save tests write: the same replica on every writer (data-parallel), from a seed,
// with random tensors of every dtype (scalars and empty ones included) and one large float32
// tensor that the planner splits across writers.
import type { CheckpointInput, TensorInput } from "../../src/format/types.ts";
import { randomCheckpoint } from "../_util.ts";

/** The replica every writer holds for `seed`; `bigRows` rows of 256 floats in `embed`. */
export function replica(seed: number, bigRows = 64): CheckpointInput & { tensors: TensorInput[] } {
  const c = randomCheckpoint(seed);
  const big = new Float32Array(bigRows * 256);
  for (let i = 0; i < big.length; i++) big[i] = Math.fround(Math.sin(seed * 7919 + i));
  const tensors = [
    ...(c.tensors as TensorInput[]),
    { name: "embed", dtype: "float32" as const, shape: [bigRows, 256], data: big },
    { name: "step", dtype: "int64" as const, shape: [], data: new BigInt64Array([BigInt(seed)]) },
  ];
  return { metadata: { ...c.metadata, step: seed }, tensors };
}

/** A split size that makes `embed` split across writers. */
export const SPLIT = 16 * 1024;
