// Exact conversions between 16-bit float bit patterns (IEEE half, bfloat16) and numbers, for the
// JSON codec. Every float16/bfloat16 value is exactly a float64; the reverse conversion refuses
// numbers that are not exactly representable instead of rounding them.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The number a float16 bit pattern stands for (NaN payloads are not kept here). */
export function f16ToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** The float16 bit pattern of `v`, or undefined when `v` is not exactly a float16 (NaN excluded). */
export function numberToF16(v: number): number | undefined {
  if (Number.isNaN(v)) return undefined;
  const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  const a = Math.abs(v);
  if (a === Infinity) return sign | 0x7c00;
  if (a === 0) return sign;
  if (a < 2 ** -14) {
    const m = a * 2 ** 24;
    return Number.isInteger(m) && m < 1024 ? sign | m : undefined;
  }
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  if (e > 15) return undefined;
  const m = (a / 2 ** e - 1) * 1024;
  return Number.isInteger(m) ? sign | ((e + 15) << 10) | m : undefined;
}

/** The number a bfloat16 bit pattern stands for. */
export function bf16ToNumber(bits: number): number {
  u32[0] = bits << 16;
  return f32[0]!;
}

/** The bfloat16 bit pattern of `v`, or undefined when `v` is not exactly a bfloat16 (NaN excluded). */
export function numberToBf16(v: number): number | undefined {
  if (Number.isNaN(v)) return undefined;
  f32[0] = v;
  if (f32[0] !== v && !(Number.isNaN(f32[0]!) && Number.isNaN(v))) return undefined;
  const bits = u32[0]!;
  if (bits & 0xffff) return undefined;
  return bits >>> 16;
}
