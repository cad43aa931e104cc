/**
 * Element-by-element comparison of two tensors of the same shape: how many elements changed,
 * how many lie outside a tolerance, the largest absolute and relative differences, and the first
 * element outside the tolerance with both values. One pass, no copies; 64-bit integers subtract
 * exactly, 16-bit floats are widened one element at a time, different dtypes compare as numbers.
 *
 * @module
 */
import type { Tensor } from "../format/types.ts";
import { bf16ToNumber, f16ToNumber } from "../format/_float16.ts";

/** How close two values must be: `|actual - expected| <= atol + rtol * |expected|`. */
export interface Tolerance {
  /**
   * Absolute tolerance.
   *
   * @default {0}
   */
  atol?: number;
  /**
   * Relative tolerance, times `|expected|`.
   *
   * @default {0}
   */
  rtol?: number;
}

/** What counts as equal, besides the tolerance. */
export interface EqualityOptions extends Tolerance {
  /**
   * Whether NaN equals NaN (any payload). When false, NaN against anything is outside any tolerance.
   *
   * @default {true}
   */
  equalNaN?: boolean;
  /**
   * Whether `-0` and `0` differ. When true, a sign change of zero is outside any tolerance.
   *
   * @default {false}
   */
  signedZero?: boolean;
}

/** One element's value: a number, or a bigint for 64-bit integers. */
export type ElementValue = number | bigint;

/** The first element outside the tolerance. */
export interface FirstDifference {
  /** Its flat (row-major) index. */
  index: number;
  /** The first tensor's value there. */
  actual: ElementValue;
  /** The second tensor's value there. */
  expected: ElementValue;
}

/** How two tensors of the same shape differ. */
export interface TensorDifference {
  /** Largest `|a - b|` over the elements (NaN against a number counts as Infinity). */
  maxAbs: number;
  /** Largest `|a - b| / max(|a|, |b|)` (0 where both are 0). */
  maxRel: number;
  /** Elements that are not identical (NaN equals NaN, `-0` equals `0`, unless told otherwise). */
  changed: number;
  /** Elements outside the tolerance (an infinite difference always is). */
  outside: number;
  /** The first element outside the tolerance, if any. */
  first?: FirstDifference;
}

/**
 * The elements of a tensor as numbers (64-bit integers rounded to the nearest double).
 *
 * @example
 * ```ts
 * import { numberAt } from "./tensor_diff.ts";
 * import assert from "node:assert/strict";
 * const at = numberAt({ name: "h", dtype: "float16", shape: [1], data: new Uint16Array([0x3c00]), group: "params" });
 * assert.equal(at(0), 1);
 * ```
 */
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

/**
 * Whether a tensor holds 64-bit integers (bigints).
 *
 * @example
 * ```ts
 * import { isBig } from "./tensor_diff.ts";
 * import assert from "node:assert/strict";
 * assert.equal(isBig({ name: "i", dtype: "int64", shape: [], data: new BigInt64Array(1), group: "optimizer" }), true);
 * ```
 */
export function isBig(t: Tensor): boolean {
  return t.dtype === "int64" || t.dtype === "uint64";
}

/**
 * Compares two tensors of the same element count element by element (of different dtypes, as
 * numbers). The element at `i` is within tolerance when `|a - b| <= atol + rtol * |b|`; NaN
 * against a number, or Infinity against -Infinity, is an infinite difference, outside any
 * tolerance.
 *
 * @example
 * ```ts
 * import { compareTensors } from "./tensor_diff.ts";
 * import assert from "node:assert/strict";
 * const t = (data: Float32Array) => ({ name: "w", dtype: "float32" as const, shape: [3], data, group: "params" });
 * const d = compareTensors(t(new Float32Array([1, 2, 3])), t(new Float32Array([1, 2.5, 3])), { atol: 0.1 });
 * assert.deepEqual(d, { maxAbs: 0.5, maxRel: 0.2, changed: 1, outside: 1, first: { index: 1, actual: 2, expected: 2.5 } });
 * ```
 */
export function compareTensors(a: Tensor, b: Tensor, options: EqualityOptions = {}): TensorDifference {
  const n = Math.min(a.data.length, b.data.length);
  const atol = options.atol ?? 0;
  const rtol = options.rtol ?? 0;
  const equalNaN = options.equalNaN ?? true;
  const signedZero = options.signedZero ?? false;
  let maxAbs = 0;
  let maxRel = 0;
  let changed = 0;
  let outside = 0;
  let first: FirstDifference | undefined;
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
    let forced = false;
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
      if (x === y) {
        if (!signedZero || x !== 0 || Object.is(x, y)) continue;
        forced = true; // 0 against -0
      } else if (x !== x && y !== y && equalNaN) continue;
      // NaN against anything, or Infinity against -Infinity: an infinite difference.
      abs = x !== x || y !== y ? Infinity : Math.abs(x - y);
    }
    changed++;
    const scale = Math.max(Math.abs(x), Math.abs(y));
    const rel = abs === Infinity ? Infinity : scale === 0 ? 0 : abs / scale;
    if (abs > maxAbs) maxAbs = abs;
    if (rel > maxRel) maxRel = rel;
    // An infinite difference is outside any tolerance (even one scaled by an infinite |b|).
    if (forced || abs === Infinity || !(abs <= atol + rtol * Math.abs(y))) {
      outside++;
      if (!first) {
        first = big ? { index: i, actual: bigA[i]!, expected: bigB[i]! } : { index: i, actual: x, expected: y };
      }
    }
  }
  return first ? { maxAbs, maxRel, changed, outside, first } : { maxAbs, maxRel, changed, outside };
}
