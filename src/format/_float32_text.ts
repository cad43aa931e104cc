// Float32 values as their shortest decimal: the fewest significant digits (at most 9) that read back
// as the same float32, the way a float32 is rounded on read (the decimal parsed as a float64, as
// JSON.parse does, then rounded to float32 with Math.fround). Printing a widened float32 with
// Number.prototype.toString gives the float64 expansion instead (0.10000000149011612 for 0.1f),
// about twice as long and slower to produce.
//
// Digits are written straight into a byte buffer, in the notation Number.prototype.toString uses
// (decimal between 1e-7 and 1e21, else d.ddde±x), so the text equals String(shortest decimal).
//
// Exactness does not rest on the digit search: every candidate n × 10^-j is checked by computing
// the float64 nearest to it (one correctly rounded IEEE division or multiplication of two exact
// doubles, the same value JSON.parse gives, for |j| ≤ 22) and rounding that to float32. Values whose
// scale needs a power of ten beyond 1e22 (below ~1e-14 or above ~1e22, subnormals included) take a
// slower path through toPrecision, checked the same way.

/** Powers of ten exactly representable as doubles. */
const P10: readonly number[] = Array.from({ length: 23 }, (_, i) => Number(`1e${i}`));
const LOG10_2 = Math.log10(2);
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/**
 * The integer n nearest `a` × 10^j if n × 10^-j reads back as `a`, else n ± 1 if one of them does,
 * else -1. The neighbours can only read back when `a` × 10^j lies within rounding error of a half
 * (the product is rounded) or `a` is a power of two (`edge`: the gap below it is half the gap
 * above, so the interval of decimals that read back as `a` is lopsided); elsewhere they are skipped.
 */
function fits(a: number, j: number, edge: boolean): number {
  if (j >= 0) {
    const s = P10[j]!;
    const y = a * s;
    const n = Math.round(y);
    if (Math.fround(n / s) === a) return n;
    if (!edge && Math.abs(y - n) < 0.4999) return -1;
    if (Math.fround((n - 1) / s) === a) return n - 1;
    if (Math.fround((n + 1) / s) === a) return n + 1;
  } else {
    const s = P10[-j]!;
    const y = a / s;
    const n = Math.round(y);
    if (Math.fround(n * s) === a) return n;
    if (!edge && Math.abs(y - n) < 0.4999) return -1;
    if (Math.fround((n - 1) * s) === a) return n - 1;
    if (Math.fround((n + 1) * s) === a) return n + 1;
  }
  return -1;
}

/** Writes `text` (ASCII) at `at`; returns the position after it. */
function writeAscii(out: Uint8Array, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) out[at++] = text.charCodeAt(i);
  return at;
}

/**
 * Shortest decimal of a finite, non-zero, positive float32 `a`, by toPrecision: for values whose
 * scale is beyond the fast path's powers of ten.
 */
function slowShortest(a: number): string {
  for (let p = 1; p < 17; p++) {
    const v = Number(a.toPrecision(p));
    if (Math.fround(v) === a) return String(v);
  }
  return String(a);
}

/** Writes the `digits` decimal digits of `m` ending just before `end` (right to left). */
function writeDigits(out: Uint8Array, end: number, m: number, digits: number): void {
  let p = end - 1;
  if (m <= 0x7fffffff) {
    // int32 arithmetic: much faster than float division and modulo.
    let v = m | 0;
    for (let i = 0; i < digits; i++) {
      const q = (v / 10) | 0;
      out[p--] = 48 + v - q * 10;
      v = q;
    }
    return;
  }
  for (let i = 0; i < digits; i++) {
    const q = Math.floor(m / 10);
    out[p--] = 48 + (m - q * 10);
    m = q;
  }
}

/**
 * Writes the integer `m` × 10^-j (m ≥ 1) at `at` as Number.prototype.toString would print that
 * value; returns the position after it.
 */
function writeDecimal(out: Uint8Array, at: number, m: number, j: number): number {
  if (m <= 0x7fffffff) {
    let v = m | 0;
    while (v % 10 === 0) {
      v = (v / 10) | 0;
      j--;
    }
    m = v;
  } else {
    while (m % 10 === 0) {
      m /= 10;
      j--;
    }
  }
  let digits = 1;
  while (digits < 17 && m >= P10[digits]!) digits++;
  const k = digits - 1 - j; // exponent of the leading digit
  if (k < -6 || k > 20) {
    // d.ddde±k
    const lead = Math.floor(m / P10[digits - 1]!);
    out[at++] = 48 + lead;
    if (digits > 1) {
      out[at++] = 46; // "."
      writeDigits(out, at + digits - 1, m - lead * P10[digits - 1]!, digits - 1);
      at += digits - 1;
    }
    out[at++] = 101; // "e"
    out[at++] = k < 0 ? 45 : 43;
    return writeAscii(out, at, String(k < 0 ? -k : k));
  }
  if (j <= 0) {
    // digits, then -j zeros
    writeDigits(out, at + digits, m, digits);
    at += digits;
    for (let i = 0; i < -j; i++) out[at++] = 48;
    return at;
  }
  if (j >= digits) {
    // 0.000ddd
    out[at++] = 48;
    out[at++] = 46;
    for (let i = 0; i < j - digits; i++) out[at++] = 48;
    writeDigits(out, at + digits, m, digits);
    return at + digits;
  }
  // ddd.ddd: the point after digits - j digits
  const whole = Math.floor(m / P10[j]!);
  writeDigits(out, at + digits - j, whole, digits - j);
  at += digits - j;
  out[at++] = 46;
  writeDigits(out, at + j, m - whole * P10[j]!, j);
  return at + j;
}

/** Most bytes {@linkcode writeFloat32} writes for one value. */
export const MAX_FLOAT32_TEXT = 24;

/**
 * Writes the shortest decimal of the float32 `x` (finite and not -0; the caller writes specials)
 * at `at` in `out` (at least {@linkcode MAX_FLOAT32_TEXT} bytes free); returns the position after
 * it.
 */
export function writeFloat32(out: Uint8Array, at: number, x: number): number {
  if (x === 0) {
    out[at] = 48;
    return at + 1;
  }
  if (x < 0) {
    out[at++] = 45;
    x = -x;
  }
  f32[0] = x;
  const e2 = ((u32[0]! >>> 23) & 0xff) - 127;
  const edge = (u32[0]! & 0x7fffff) === 0;
  // The decimal exponent from the binary one, possibly one low, then corrected (a product
  // rounded up across a power of ten could leave it one high: the searches below absorb that).
  let e = Math.floor(e2 * LOG10_2);
  const j8 = 7 - e;
  if (j8 + 2 > 22 || j8 - 10 < -22) return writeAscii(out, at, slowShortest(x));
  if (e >= -1 ? x >= P10[e + 1]! : x * P10[-1 - e]! >= 1) e++;
  // Which digit counts read back is upward closed: from 7 digits (the most common count after 8
  // for weights, so most values take two checks), go down while it still holds, or up to 9 (10
  // when e was one high) when it does not.
  let j = 6 - e;
  let m = fits(x, j, edge);
  if (m < 0) {
    m = fits(x, ++j, edge);
    if (m < 0) m = fits(x, ++j, edge);
    if (m < 0) m = fits(x, ++j, edge);
    if (m < 0) return writeAscii(out, at, slowShortest(x));
  } else {
    for (;;) {
      const n = fits(x, j - 1, edge);
      if (n <= 0) break;
      m = n;
      j--;
    }
  }
  return writeDecimal(out, at, m, j);
}

const scratch = new Uint8Array(MAX_FLOAT32_TEXT + 1);
const latin1 = new TextDecoder("latin1");

/**
 * The shortest decimal of a float32 value as a string (finite values; -0 gives "0").
 *
 * @example
 * ```ts
 * import { float32ToString } from "./_float32_text.ts";
 * import assert from "node:assert/strict";
 * assert.equal(float32ToString(Math.fround(0.1)), "0.1");
 * ```
 */
export function float32ToString(x: number): string {
  return latin1.decode(scratch.subarray(0, writeFloat32(scratch, 0, x)));
}
