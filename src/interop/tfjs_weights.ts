/**
 * How ckpt tensors become TF.js weights (a weights-manifest entry plus bytes) and back.
 * TF.js weights hold `float32`, `int32` and `bool`; the other dtypes are converted as follows,
 * and the original dtype is recorded so that the reverse conversion is exact:
 *
 * | ckpt dtype | manifest entry | bytes stored | what TF.js loads |
 * | --- | --- | --- | --- |
 * | float32, int32, bool | same dtype | as is | same values |
 * | float16 | float32, quantization float16 | the 16-bit patterns | exact float32 values |
 * | uint8, uint16 | int32, quantization uint8 / uint16, scale 1, min 0 | as is | exact int32 values |
 * | int8, int16 | int32 | widened to int32 | exact int32 values |
 * | bfloat16 | float32 | widened to float32 (bits << 16) | exact float32 values |
 * | float64 | float32 (only with `narrow`) | rounded to float32 | rounded values (lossy) |
 * | int64, uint64, uint32 | int32 (only with `narrow`) | int32, each value checked to fit | exact int32 values |
 *
 * @module
 */
import type { io } from "@tensorflow/tfjs-core";
import { bytesOf, elementCount, typedArrayFrom } from "../format/dtype.ts";
import type { DType, Tensor, TensorData, TensorInput } from "../format/types.ts";

/** A TF.js weights-manifest entry. */
export type WeightSpec = io.WeightsManifestEntry;

/** Options for {@linkcode tensorToWeight}. */
export interface WeightOptions {
  /**
   * Convert dtypes TF.js cannot hold: float64 to float32 (rounding), int64, uint64 and uint32
   * to int32 (a `RangeError` names the first value that does not fit). Without it they are a
   * `TypeError`.
   *
   * @default {false}
   */
  narrow?: boolean;
}

/** A tensor as a TF.js weight. */
export interface Weight {
  /** The manifest entry. */
  spec: WeightSpec;
  /** The bytes TF.js reads for it. */
  bytes: Uint8Array;
  /** The ckpt dtype, when the manifest's dtype alone does not say it. */
  original?: DType;
}

const NATIVE = new Set<DType>(["float32", "int32", "bool"]);
const NARROWED = new Set<DType>(["float64", "int64", "uint64", "uint32"]);

function toInt32(t: TensorInput): Int32Array {
  const out = new Int32Array(t.data.length);
  for (let i = 0; i < out.length; i++) {
    const v = t.data[i]!;
    const n = typeof v === "bigint" ? v : BigInt(v);
    if (n < -2147483648n || n > 2147483647n) {
      throw new RangeError(
        `Cannot convert tensor ${JSON.stringify(t.name)} to TF.js: ${t.dtype} element ${i} is ${n}, outside int32`,
      );
    }
    out[i] = Number(n);
  }
  return out;
}

/**
 * A tensor as a TF.js weight, converted as the module table says. Throws a `TypeError` for
 * float64, int64, uint64 and uint32 unless `narrow` is set.
 *
 * @example
 * ```ts
 * import { tensorToWeight } from "./tfjs_weights.ts";
 * import assert from "node:assert/strict";
 * const w = tensorToWeight({ name: "h", dtype: "float16", shape: [1], data: new Uint16Array([0x3c00]) });
 * assert.deepEqual(w.spec, { name: "h", shape: [1], dtype: "float32", quantization: { dtype: "float16" } });
 * assert.equal(w.original, "float16");
 * ```
 */
export function tensorToWeight(t: TensorInput, options: WeightOptions = {}): Weight {
  const shape = [...t.shape];
  const group = t.group === "optimizer" ? { group: "optimizer" as const } : {};
  const spec = (dtype: "float32" | "int32" | "bool", extra: Partial<WeightSpec> = {}): WeightSpec => ({
    name: t.name,
    shape,
    dtype,
    ...group,
    ...extra,
  });
  switch (t.dtype) {
    case "float32":
    case "int32":
    case "bool":
      return { spec: spec(t.dtype), bytes: bytesOf(t.data) };
    case "float16":
      return {
        spec: spec("float32", { quantization: { dtype: "float16" } }),
        bytes: bytesOf(t.data),
        original: t.dtype,
      };
    case "uint8":
    case "uint16":
      return {
        spec: spec("int32", { quantization: { dtype: t.dtype, scale: 1, min: 0 } }),
        bytes: bytesOf(t.data),
        original: t.dtype,
      };
    case "int8":
    case "int16":
      return { spec: spec("int32"), bytes: bytesOf(Int32Array.from(t.data as Int8Array)), original: t.dtype };
    case "bfloat16": {
      const src = t.data as Uint16Array;
      const out = new Uint32Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = src[i]! << 16 >>> 0;
      return { spec: spec("float32"), bytes: bytesOf(out), original: t.dtype };
    }
  }
  if (!options.narrow) {
    throw new TypeError(
      `Cannot convert tensor ${
        JSON.stringify(t.name)
      } to TF.js: dtype ${t.dtype} has no TF.js weight type (pass narrow: true to convert it to ${
        t.dtype === "float64" ? "float32, rounding" : "int32, checking each value fits"
      })`,
    );
  }
  if (t.dtype === "float64") {
    return { spec: spec("float32"), bytes: bytesOf(Float32Array.from(t.data as Float64Array)), original: t.dtype };
  }
  return { spec: spec("int32"), bytes: bytesOf(toInt32(t)), original: t.dtype };
}

type Quantization = NonNullable<WeightSpec["quantization"]>;

/**
 * A manifest entry's quantization, checked: absent, or an object whose `dtype` is `uint8`,
 * `uint16` or `float16` (manifests are untrusted JSON, so `null`, numbers and `{}` occur).
 */
function quantizationOf(spec: WeightSpec): Quantization | undefined {
  const q: unknown = spec.quantization;
  if (q === undefined) return undefined;
  const where = `weight ${JSON.stringify(spec.name)}`;
  if (typeof q !== "object" || q === null || Array.isArray(q)) {
    throw new SyntaxError(`Cannot decode TF.js weights: ${where} has quantization ${JSON.stringify(q)}, not an object`);
  }
  const dtype = (q as { dtype?: unknown }).dtype;
  if (dtype !== "uint8" && dtype !== "uint16" && dtype !== "float16") {
    throw new SyntaxError(`Cannot decode TF.js weights: ${where} has unknown quantization ${JSON.stringify(dtype)}`);
  }
  return q as Quantization;
}

/**
 * Bytes a manifest entry occupies in the weight data. Throws a `RangeError` for string and
 * complex64 weights (ckpt has no such dtypes) and a `SyntaxError` for a malformed entry.
 *
 * @example
 * ```ts
 * import { weightByteLength } from "./tfjs_weights.ts";
 * import assert from "node:assert/strict";
 * assert.equal(weightByteLength({ name: "w", shape: [2, 3], dtype: "float32", quantization: { dtype: "uint8" } }), 6);
 * ```
 */
export function weightByteLength(spec: WeightSpec): number {
  const where = `weight ${JSON.stringify(spec.name)}`;
  let count: number;
  try {
    count = elementCount(Array.isArray(spec.shape) ? spec.shape : [NaN], where);
  } catch (e) {
    throw new SyntaxError(`Cannot decode TF.js weights: ${(e as Error).message}`);
  }
  const q = quantizationOf(spec)?.dtype;
  if (q !== undefined) return q === "uint8" ? count : count * 2;
  switch (spec.dtype) {
    case "float32":
    case "int32":
      return count * 4;
    case "bool":
      return count;
    case "string":
    case "complex64":
      throw new RangeError(`Cannot decode TF.js weights: ${where} has dtype ${spec.dtype}, which ckpt cannot hold`);
  }
  throw new SyntaxError(`Cannot decode TF.js weights: ${where} has unknown dtype ${JSON.stringify(spec.dtype)}`);
}

function bad(spec: WeightSpec, why: string): never {
  throw new SyntaxError(`Cannot decode TF.js weights: weight ${JSON.stringify(spec.name)} ${why}`);
}

function narrowInts(
  spec: WeightSpec,
  src: Int32Array,
  dtype: "int8" | "int16" | "uint32" | "int64" | "uint64",
): TensorData {
  const [lo, hi, Out] = {
    int8: [-128, 127, Int8Array],
    int16: [-32768, 32767, Int16Array],
    uint32: [0, 2147483647, Uint32Array],
    int64: [-2147483648, 2147483647, BigInt64Array],
    uint64: [0, 2147483647, BigUint64Array],
  }[dtype] as [number, number, { new (n: number): TensorData }];
  const out = new Out(src.length);
  for (let i = 0; i < src.length; i++) {
    const v = src[i]!;
    if (v < lo || v > hi) bad(spec, `element ${i} is ${v}, outside ${dtype}`);
    out[i] = (typeof out[0] === "bigint" ? BigInt(v) : v) as never;
  }
  return out;
}

/**
 * A tensor from a manifest entry and its bytes (exactly {@linkcode weightByteLength} of them).
 * With `original` (the dtype recorded at export) the conversion of {@linkcode tensorToWeight} is
 * undone exactly; without it the weight reads as TF.js would load it, except that float16
 * quantized weights stay float16 (their exact bits).
 *
 * @example
 * ```ts
 * import { tensorToWeight, weightToTensor } from "./tfjs_weights.ts";
 * import assert from "node:assert/strict";
 * const w = tensorToWeight({ name: "i", dtype: "int8", shape: [2], data: new Int8Array([-5, 7]) });
 * const t = weightToTensor(w.spec, w.bytes, w.original);
 * assert.deepEqual(t.data, new Int8Array([-5, 7]));
 * ```
 */
export function weightToTensor(spec: WeightSpec, bytes: Uint8Array, original?: DType): Tensor {
  const shape = [...spec.shape];
  const group = spec.group === "optimizer" ? "optimizer" : "params";
  const make = (dtype: DType, data: TensorData): Tensor => ({ name: spec.name, dtype, shape, group, data });
  const q = quantizationOf(spec);
  const expect = (dtype: string, quant?: string): void => {
    if (spec.dtype !== dtype || q?.dtype !== quant) {
      bad(spec, `was exported from ${original} but is ${spec.dtype}${q ? ` quantized as ${q.dtype}` : ""}`);
    }
  };
  if (original !== undefined && !NATIVE.has(original)) {
    switch (original) {
      case "float16":
        expect("float32", "float16");
        return make(original, typedArrayFrom(original, bytes));
      case "uint8":
      case "uint16":
        expect("int32", original);
        if (q!.scale !== 1 || q!.min !== 0) {
          bad(spec, `was exported from ${original} but has scale ${q!.scale}, min ${q!.min}`);
        }
        return make(original, typedArrayFrom(original, bytes));
      case "int8":
      case "int16":
      case "int64":
      case "uint64":
      case "uint32":
        expect("int32");
        return make(original, narrowInts(spec, typedArrayFrom("int32", bytes) as Int32Array, original));
      case "bfloat16": {
        expect("float32");
        const src = typedArrayFrom("uint32", bytes) as Uint32Array;
        const out = new Uint16Array(src.length);
        for (let i = 0; i < src.length; i++) {
          if ((src[i]! & 0xffff) !== 0) bad(spec, `element ${i} is not a bfloat16 value (low 16 bits set)`);
          out[i] = src[i]! >>> 16;
        }
        return make(original, out);
      }
      case "float64":
        expect("float32");
        return make(original, Float64Array.from(typedArrayFrom("float32", bytes) as Float32Array));
    }
  }
  if (original !== undefined && (spec.dtype !== original || q !== undefined)) {
    bad(spec, `was exported from ${original} but is ${spec.dtype}${q ? ` quantized as ${q.dtype}` : ""}`);
  }
  if (q !== undefined) {
    if (q.dtype === "float16") {
      if (spec.dtype !== "float32") bad(spec, "is float16-quantized but not float32");
      return make("float16", typedArrayFrom("float16", bytes));
    }
    // Affine quantization from other tools: dequantize as TF.js does.
    const src = typedArrayFrom(q.dtype, bytes) as Uint8Array | Uint16Array;
    const scale = q.scale, min = q.min;
    if (typeof scale !== "number" || typeof min !== "number") {
      bad(spec, `is ${q.dtype}-quantized without scale and min`);
    }
    if (spec.dtype === "float32") return make("float32", Float32Array.from(src, (v) => v * scale + min));
    if (spec.dtype === "int32") return make("int32", Int32Array.from(src, (v) => Math.round(v * scale + min)));
    bad(spec, `is ${q.dtype}-quantized but has dtype ${spec.dtype}`);
  }
  const dtype = spec.dtype as DType;
  const data = typedArrayFrom(dtype, bytes);
  if (dtype === "bool") {
    const i = (data as Uint8Array).findIndex((v) => v > 1);
    if (i >= 0) bad(spec, `bool element ${i} is ${data[i]}, not 0 or 1`);
  }
  return make(dtype, data);
}

/**
 * Whether a dtype needs {@linkcode WeightOptions.narrow} to become a TF.js weight.
 *
 * @example
 * ```ts
 * import { needsNarrowing } from "./tfjs_weights.ts";
 * import assert from "node:assert/strict";
 * assert.ok(needsNarrowing("float64"));
 * assert.ok(!needsNarrowing("bfloat16"));
 * ```
 */
export function needsNarrowing(dtype: DType): boolean {
  return NARROWED.has(dtype);
}
