// Per-tensor numbers for `inspect --stats` and `diff`: one pass over a tensor's elements, no
// copies (float16/bfloat16 bit patterns are widened one element at a time).

import type { Tensor } from "../../mod.ts";
import { bf16ToNumber, f16ToNumber } from "../format/_float16.ts";

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

/** The elements of a tensor as numbers (64-bit integers excepted: see {@linkcode isBig}). */
export function numberAt(t: Tensor): (i: number) => number {
  const d = t.data;
  switch (t.dtype) {
    case "float16":
      return (i) => f16ToNumber((d as Uint16Array)[i]!);
    case "bfloat16":
      return (i) => bf16ToNumber((d as Uint16Array)[i]!);
    case "int64":
    case "uint64":
      return (i) => Number((d as BigInt64Array)[i]!);
    default:
      return (i) => (d as Float64Array)[i]!;
  }
}

/** Whether a tensor holds 64-bit integers (bigints). */
export function isBig(t: Tensor): boolean {
  return t.dtype === "int64" || t.dtype === "uint64";
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

/** How two tensors of the same shape differ. */
export interface Difference {
  /** Largest `|a - b|` over the elements (NaN against a number counts as Infinity). */
  maxAbs: number;
  /** Largest `|a - b| / max(|a|, |b|)` (0 where both are 0). */
  maxRel: number;
  /** Elements that are not identical (NaN equals NaN). */
  changed: number;
  /** Elements outside the tolerance `|a - b| <= atol + rtol * |b|` (an infinite difference always is). */
  outside: number;
}

/** Compares two tensors of the same shape element by element (of different dtypes, as numbers). */
export function compareTensors(a: Tensor, b: Tensor, tolerance: { atol: number; rtol: number }): Difference {
  const n = a.data.length;
  const { atol, rtol } = tolerance;
  let maxAbs = 0;
  let maxRel = 0;
  let changed = 0;
  let outside = 0;
  // Same dtype: 64-bit integers subtract exactly, plain arrays are indexed directly. Different
  // dtypes (float32 against float16, say) are compared as numbers.
  const big = isBig(a) && a.dtype === b.dtype;
  const widened = a.dtype !== b.dtype || a.dtype === "float16" || a.dtype === "bfloat16" || isBig(a);
  const atA = numberAt(a);
  const atB = numberAt(b);
  const bigA = a.data as BigInt64Array;
  const bigB = b.data as BigInt64Array;
  const plainA = a.data as Float64Array;
  const plainB = b.data as Float64Array;
  for (let i = 0; i < n; i++) {
    let abs: number;
    let x: number;
    let y: number;
    if (big) {
      const p = bigA[i]!;
      const q = bigB[i]!;
      if (p === q) continue;
      abs = Number(p > q ? p - q : q - p);
      x = Number(p);
      y = Number(q);
    } else {
      x = widened ? atA(i) : plainA[i]!;
      y = widened ? atB(i) : plainB[i]!;
      if (x === y || (x !== x && y !== y)) continue;
      // NaN against a number, or Infinity against -Infinity: an infinite difference.
      abs = x !== x || y !== y ? Infinity : Math.abs(x - y);
    }
    changed++;
    const scale = Math.max(Math.abs(x), Math.abs(y));
    const rel = abs === Infinity ? Infinity : scale === 0 ? 0 : abs / scale;
    if (abs > maxAbs) maxAbs = abs;
    if (rel > maxRel) maxRel = rel;
    // An infinite difference is outside any tolerance (even one scaled by an infinite |b|).
    if (abs === Infinity || !(abs <= atol + rtol * Math.abs(y))) outside++;
  }
  return { maxAbs, maxRel, changed, outside };
}
