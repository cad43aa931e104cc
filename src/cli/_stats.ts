// Per-tensor numbers for `inspect --stats`: one pass over a tensor's elements, no
// copies (float16/bfloat16 bit patterns are widened one element at a time).

import type { Tensor } from "../../mod.ts";
import { isBig, numberAt } from "../compare/tensor_diff.ts";

/** Min, max, mean and NaN count of a tensor. */
export interface TensorStats {
  /** Smallest element, NaN ignored; `null` when there is none. 64-bit integers stay exact. */
  min: number | bigint | null;
  /** Largest element, NaN ignored; `null` when there is none. */
  max: number | bigint | null;
  /** Mean of the elements that are not NaN; `null` when there are none. */
  mean: number | null;
  /** How many elements are NaN. */
  nan: number;
}

/** Min, max, mean (NaN ignored) and NaN count, in one pass. */
export function tensorStats(t: Tensor): TensorStats {
  const n = t.data.length;
  if (isBig(t)) {
    const d = t.data as BigInt64Array | BigUint64Array;
    if (n === 0) return { min: null, max: null, mean: null, nan: 0 };
    let min = d[0]!;
    let max = d[0]!;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const v = d[i]!;
      if (v < min) min = v;
      if (v > max) max = v;
      sum += Number(v);
    }
    return { min, max, mean: sum / n, nan: 0 };
  }
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let nan = 0;
  if (t.dtype === "float16" || t.dtype === "bfloat16") {
    const at = numberAt(t);
    for (let i = 0; i < n; i++) {
      const v = at(i);
      if (v !== v) {
        nan++;
        continue;
      }
      if (v < min) min = v;
      if (v > max) max = v;
      sum += v;
    }
  } else {
    // Plain typed arrays of numbers: index them directly (no per-element call).
    const d = t.data as Float64Array;
    for (let i = 0; i < n; i++) {
      const v = d[i]!;
      if (v !== v) {
        nan++;
        continue;
      }
      if (v < min) min = v;
      if (v > max) max = v;
      sum += v;
    }
  }
  const counted = n - nan;
  if (counted === 0) return { min: null, max: null, mean: null, nan };
  return { min, max, mean: sum / counted, nan };
}
