/**
 * `assertCheckpointEquals`: two checkpoints are the same up to a tolerance, or the assertion
 * says which tensors differ and by how much.
 *
 * @module
 */
import { checkDiffOptions } from "../compare/_option_names.ts";
import { ASSERT_OPTION_NAMES } from "./_option_names.ts";
import { diffCheckpoints, differs, type DiffOptions } from "../compare/checkpoint_diff.ts";
import { formatDiff } from "../compare/format.ts";
import type { DecodeOptions } from "../format/decode.ts";
import { AssertionError } from "./assertion_error.ts";
import { type CheckpointLike, openSide } from "./_open.ts";

export type { CheckpointLike };

/** Options for {@linkcode assertCheckpointEquals}. */
export interface AssertCheckpointOptions extends DiffOptions {
  /**
   * Entries listed per section of the failure message; the rest are counted.
   *
   * @default {10}
   */
  maxEntries?: number;
  /** Text put before the failure message. */
  message?: string;
  /**
   * Options for reading sources (caps, codecs of your own).
   *
   * @default {{}}
   */
  decode?: DecodeOptions;
}

/**
 * Asserts that two checkpoints hold the same metadata (less `ignoreMetadata`) and the same
 * tensors: names, groups, dtypes, shapes, and values within `|actual - expected| <= atol + rtol * |expected|`
 * (per dtype or per name pattern; NaN equals NaN and `-0` equals `0` unless told otherwise).
 * Either side may be an in-memory checkpoint or anything `loadCheckpoint` reads; sources are
 * compared tensor by tensor in bounded memory. On failure it throws an {@linkcode AssertionError}
 * that lists the tensors on one side only, each dtype, shape or group change, and per differing
 * tensor the count of elements out of tolerance, the largest absolute and relative differences
 * and the first differing element with both values.
 *
 * @example
 * ```ts
 * import { assertCheckpointEquals } from "./assert.ts";
 * import assert from "node:assert/strict";
 * const ckpt = (w: number[]) => ({
 *   metadata: { step: 10 },
 *   tensors: [{ name: "dense/kernel", dtype: "float32" as const, shape: [2, 2], data: new Float32Array(w) }],
 * });
 * await assertCheckpointEquals(ckpt([1, 2, 3, 4]), ckpt([1, 2, 3, 4.0000001]), { atol: 1e-6 });
 * await assert.rejects(
 *   assertCheckpointEquals(ckpt([1, 2, 3, 4]), ckpt([1, 2, 3, 5])),
 *   /"dense\/kernel" float32 \[2, 2\]: 1 of 4 elements outside atol 0 \+ rtol 0 \* \|expected\|; max abs diff 1, max rel diff 0\.2; first at \[1, 1\]: actual 4, expected 5/,
 * );
 * ```
 */
export async function assertCheckpointEquals(
  actual: CheckpointLike,
  expected: CheckpointLike,
  options: AssertCheckpointOptions = {},
): Promise<void> {
  checkDiffOptions(options, "Cannot compare checkpoints", ASSERT_OPTION_NAMES);
  const { maxEntries: _maxEntries, message: _message, decode: _decode, ...compare } = options;
  const a = await openSide(actual, "actual", options.decode);
  let diff;
  try {
    const b = await openSide(expected, "expected", options.decode);
    try {
      diff = await diffCheckpoints(a, b, compare);
    } finally {
      await b.close();
    }
  } finally {
    await a.close();
  }
  if (!differs(diff, { metadata: true })) return;
  const text = formatDiff(diff, { maxEntries: options.maxEntries });
  throw new AssertionError((options.message ? `${options.message}: ` : "") + text.trimEnd());
}
