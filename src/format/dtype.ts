/**
 * The dtypes a checkpoint holds: byte sizes, typed array constructors, and the checks
 * every tensor passes before it is written or handed out.
 *
 * @module
 */
import type { DType, TensorData, TensorInput } from "./types.ts";
import { withArticle } from "./_article.ts";

/** What ckpt knows about one dtype. */
export interface DTypeInfo {
  /** Bytes per element. */
  readonly bytes: number;
  /** The typed array that holds its elements. */
  readonly array: TypedArrayConstructor;
}

/** A constructor of one of the typed arrays in {@linkcode TensorData}. */
export type TypedArrayConstructor = {
  new (length: number): TensorData;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): TensorData;
  readonly BYTES_PER_ELEMENT: number;
};

/**
 * Every dtype in the order of its numeric code (the binary format stores the name, not the code).
 *
 * @example
 * ```ts
 * import { DTYPES } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * assert.equal(DTYPES.bfloat16.bytes, 2);
 * ```
 */
export const DTYPES: Readonly<Record<DType, DTypeInfo>> = Object.freeze({
  float32: { bytes: 4, array: Float32Array },
  float64: { bytes: 8, array: Float64Array },
  float16: { bytes: 2, array: Uint16Array },
  bfloat16: { bytes: 2, array: Uint16Array },
  int8: { bytes: 1, array: Int8Array },
  uint8: { bytes: 1, array: Uint8Array },
  int16: { bytes: 2, array: Int16Array },
  uint16: { bytes: 2, array: Uint16Array },
  int32: { bytes: 4, array: Int32Array },
  uint32: { bytes: 4, array: Uint32Array },
  int64: { bytes: 8, array: BigInt64Array },
  uint64: { bytes: 8, array: BigUint64Array },
  bool: { bytes: 1, array: Uint8Array },
} as Record<DType, DTypeInfo>);

/**
 * Whether a string names a dtype.
 *
 * @example
 * ```ts
 * import { isDType } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * assert.ok(isDType("int64"));
 * assert.ok(!isDType("complex64"));
 * ```
 */
export function isDType(value: unknown): value is DType {
  return typeof value === "string" && Object.hasOwn(DTYPES, value);
}

/**
 * The number of elements of a shape, checked: every dimension a non-negative safe integer,
 * and the product a safe integer. Throws a `RangeError` naming `where` otherwise.
 *
 * @example
 * ```ts
 * import { elementCount } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * assert.equal(elementCount([2, 3]), 6);
 * assert.equal(elementCount([]), 1);
 * assert.throws(() => elementCount([-1]), RangeError);
 * ```
 */
export function elementCount(shape: readonly unknown[], where = "tensor"): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i];
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      throw new RangeError(
        `Invalid shape for ${where}: dimension ${i} is ${
          typeof d === "number" ? d : JSON.stringify(d) ?? String(d)
        }, not a non-negative integer`,
      );
    }
    n *= d;
    if (!Number.isSafeInteger(n)) {
      throw new RangeError(
        `Invalid shape for ${where}: [${shape.join(", ")}] has more than 2^53 elements`,
      );
    }
  }
  return n;
}

/**
 * The bytes of a typed array, as a `Uint8Array` view of the same memory (no copy).
 *
 * @example
 * ```ts
 * import { bytesOf } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual([...bytesOf(new Uint16Array([0x0201]))], [1, 2]);
 * ```
 */
export function bytesOf(data: ArrayBufferView): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * The bytes of `parts`, one after another, in one new array.
 *
 * @example
 * ```ts
 * import { concatBytes } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual([...concatBytes([new Uint8Array([1]), new Uint8Array([2, 3])])], [1, 2, 3]);
 * ```
 */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** Names that would be dangerous as object keys; checkpoints refuse them as tensor names. */
const RESERVED_NAMES = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Checks a tensor name: a non-empty, well-formed UTF-16 string (so valid UTF-8) that is not
 * `__proto__`, `constructor` or `prototype`. Returns an error message, or `undefined` when fine.
 *
 * @example
 * ```ts
 * import { checkTensorName } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * assert.equal(checkTensorName("dense/kernel"), undefined);
 * assert.match(checkTensorName("__proto__")!, /reserved/);
 * ```
 */
export function checkTensorName(name: unknown): string | undefined {
  if (typeof name !== "string") return `tensor name must be a string, got ${typeof name}`;
  if (name.length === 0) return "tensor name must not be empty";
  if (!name.isWellFormed()) return `tensor name ${JSON.stringify(name)} is not valid Unicode`;
  if (RESERVED_NAMES.has(name)) return `tensor name ${JSON.stringify(name)} is reserved`;
  return undefined;
}

/**
 * Checks a tensor before it is written: name, dtype, group, shape, and that `data` is the typed
 * array of its dtype with exactly as many elements as the shape says (and bools are 0 or 1).
 * Throws a `TypeError` or `RangeError` that names the tensor.
 *
 * @example
 * ```ts
 * import { validateTensor } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * validateTensor({ name: "w", dtype: "float32", shape: [2], data: new Float32Array(2) });
 * assert.throws(
 *   () => validateTensor({ name: "w", dtype: "float32", shape: [3], data: new Float32Array(2) }),
 *   RangeError,
 * );
 * ```
 */
export function validateTensor(tensor: TensorInput): void {
  const bad = checkTensorName(tensor?.name);
  if (bad) throw new TypeError(`Invalid tensor: ${bad}`);
  const where = `tensor ${JSON.stringify(tensor.name)}`;
  if (!isDType(tensor.dtype)) {
    throw new TypeError(`Invalid ${where}: unknown dtype ${JSON.stringify(tensor.dtype)}`);
  }
  if (tensor.group !== undefined && (typeof tensor.group !== "string" || !tensor.group.isWellFormed())) {
    throw new TypeError(`Invalid ${where}: group must be a string`);
  }
  if (!Array.isArray(tensor.shape)) throw new TypeError(`Invalid ${where}: shape must be an array`);
  const n = elementCount(tensor.shape, where);
  const info = DTYPES[tensor.dtype];
  if (!(tensor.data instanceof info.array)) {
    throw new TypeError(
      `Invalid ${where}: dtype ${tensor.dtype} needs ${withArticle(info.array.name)}, got ${
        (tensor.data as object | undefined)?.constructor?.name ?? typeof tensor.data
      }`,
    );
  }
  if (tensor.data.length !== n) {
    throw new RangeError(
      `Invalid ${where}: shape [${tensor.shape.join(", ")}] has ${n} elements but data has ${tensor.data.length}`,
    );
  }
  if (tensor.dtype === "bool") {
    const i = (tensor.data as Uint8Array).findIndex((v) => v > 1);
    if (i >= 0) throw new RangeError(`Invalid ${where}: bool element ${i} is ${tensor.data[i]}, not 0 or 1`);
  }
}

/**
 * A typed array of `dtype` over `bytes`: a view without copying when `bytes` is aligned for the
 * element size, else an aligned copy. The byte length must be a multiple of the element size.
 *
 * @example
 * ```ts
 * import { typedArrayFrom } from "./dtype.ts";
 * import assert from "node:assert/strict";
 * const a = typedArrayFrom("int16", new Uint8Array([1, 0, 2, 0]));
 * assert.deepEqual([...a], [1, 2]);
 * ```
 */
export function typedArrayFrom(dtype: DType, bytes: Uint8Array): TensorData {
  const info = DTYPES[dtype];
  const n = bytes.byteLength / info.bytes;
  if (bytes.byteOffset % info.bytes === 0) return new info.array(bytes.buffer, bytes.byteOffset, n);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new info.array(copy.buffer, 0, n);
}
