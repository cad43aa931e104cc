/**
 * The checkpoint data model: metadata plus an ordered sequence of named tensors.
 *
 * @module
 */

/** Element types a tensor may have. `float16` and `bfloat16` are kept as raw 16-bit patterns. */
export type DType =
  | "float32"
  | "float64"
  | "float16"
  | "bfloat16"
  | "int8"
  | "uint8"
  | "int16"
  | "uint16"
  | "int32"
  | "uint32"
  | "int64"
  | "uint64"
  | "bool";

/**
 * The typed array that holds a tensor's elements, by dtype:
 * `float16` and `bfloat16` use `Uint16Array` (raw bits), `bool` uses `Uint8Array` (0 or 1),
 * `int64` and `uint64` use `BigInt64Array` and `BigUint64Array`.
 */
export type TensorData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/** A named tensor as it goes into a checkpoint. */
export interface TensorInput {
  /** Unique, non-empty name, such as `"dense/kernel"`. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** Dimensions: non-negative integers; `[]` is a scalar, a zero dimension makes the tensor empty. */
  shape: readonly number[];
  /**
   * The elements in row-major order, in the typed array matching `dtype`. A tensor read from a
   * checkpoint may be a view into a larger buffer: use its `byteOffset` and `length`, not
   * `data.buffer` alone.
   */
  data: TensorData;
  /**
   * What the tensor is for, such as `"params"`, `"buffers"` or `"optimizer"`.
   *
   * @default {"params"}
   */
  group?: string;
}

/** A named tensor as it comes out of a checkpoint: the group is always set. */
export interface Tensor extends TensorInput {
  /** What the tensor is for, such as `"params"`, `"buffers"` or `"optimizer"`. */
  group: string;
}

/** A JSON value, as kept in {@linkcode Metadata.custom}. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/** What a checkpoint says about itself. */
export interface Metadata {
  /** Training step: a non-negative safe integer. */
  step: number;
  /** Training epoch, when the trainer counts them. */
  epoch?: number;
  /** When the checkpoint was made, as an ISO 8601 string; never added implicitly, so output stays deterministic. */
  createdAt?: string;
  /** Free-form JSON values keyed by string (finite numbers only, as JSON allows). */
  custom?: Record<string, JsonValue>;
  /** Named numbers such as a loss; NaN and ±Infinity are kept exactly. */
  metrics?: Record<string, number>;
}

/** A checkpoint on its way in: tensors may be an array or produced lazily. */
export interface CheckpointInput {
  /** Metadata, written before any tensor. */
  metadata: Metadata;
  /** Tensors in the order they are written; an async iterable lets a writer hold one at a time. */
  tensors:
    | Iterable<TensorInput>
    | AsyncIterable<TensorInput>;
}

/** A checkpoint read back whole. */
export interface Checkpoint {
  /** Metadata as written. */
  metadata: Metadata;
  /** Tensors in the order they were written. */
  tensors: Tensor[];
}

/** The records a codec turns into bytes and back: the metadata first, then one record per tensor. */
export type CheckpointRecord =
  | { readonly type: "metadata"; readonly metadata: Metadata }
  | { readonly type: "tensor"; readonly tensor: Tensor };
