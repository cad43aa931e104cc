// Shared by the S3 crash test and its child: the checkpoint saved, and the part size.
import type { CheckpointInput } from "../../mod.ts";

/** The smallest part S3 takes. */
export const PART_SIZE = 5 * 2 ** 20;

/** A checkpoint of about three and a half parts, so its upload is a multipart one. */
export function bigCheckpoint(step: number): CheckpointInput {
  const n = Math.floor((3.5 * PART_SIZE) / 4);
  return {
    metadata: { step },
    tensors: [
      { name: "w", dtype: "float32", shape: [n], data: new Float32Array(n).map((_, i) => step + i) },
      { name: "b", dtype: "int32", shape: [3], data: new Int32Array([step, -step, 7]) },
    ],
  };
}
