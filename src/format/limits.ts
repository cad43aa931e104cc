/**
 * Caps on what a decoder accepts from untrusted bytes. Every length, count and shape read from
 * input is checked against these before it is used.
 *
 * @module
 */

/** Caps a decoder enforces; each has a documented default in {@linkcode DEFAULT_LIMITS}. */
export interface DecodeLimits {
  /**
   * Largest tensor, in bytes of data.
   *
   * @default {17179869184} (16 GiB)
   */
  maxTensorBytes?: number;
  /**
   * Largest metadata or tensor descriptor (JSON), in bytes.
   *
   * @default {16777216} (16 MiB)
   */
  maxHeaderBytes?: number;
  /**
   * Largest tensor rank.
   *
   * @default {64}
   */
  maxRank?: number;
  /**
   * Most tensors in one checkpoint.
   *
   * @default {1000000}
   */
  maxTensors?: number;
  /**
   * Longest line in a line-oriented codec such as JSON Lines, in bytes.
   *
   * @default {67108864} (64 MiB)
   */
  maxLineBytes?: number;
  /**
   * Most bytes a decoder may be handed for one checkpoint, counted after decompression: a cap on
   * the total work and memory untrusted input can ask for. `Infinity` for none.
   *
   * @default {Infinity}
   */
  maxDecodedBytes?: number;
  /**
   * Most bytes gzip may expand to per compressed byte read, checked once 1 MiB has come out. A
   * valid checkpoint can legitimately expand a lot (deflate reaches about 1000:1 on zeros, such
   * as fresh optimizer slots), so there is no cap by default; for untrusted input, a cap such as
   * 100 stops a small gzip body that declares a huge tensor long before it costs memory.
   * `Infinity` for none.
   *
   * @default {Infinity}
   */
  maxCompressionRatio?: number;
}

/**
 * The default caps.
 *
 * @example
 * ```ts
 * import { DEFAULT_LIMITS } from "./limits.ts";
 * import assert from "node:assert/strict";
 * assert.equal(DEFAULT_LIMITS.maxRank, 64);
 * ```
 */
export const DEFAULT_LIMITS: Readonly<Required<DecodeLimits>> = Object.freeze({
  maxTensorBytes: 16 * 2 ** 30,
  maxHeaderBytes: 16 * 2 ** 20,
  maxRank: 64,
  maxTensors: 1_000_000,
  maxLineBytes: 64 * 2 ** 20,
  maxDecodedBytes: Infinity,
  maxCompressionRatio: Infinity,
});

/**
 * Caps for checkpoints from untrusted sources, where the size cannot be known beforehand
 * (standard input, a URL): 16 GiB decoded at most, and gzip expanding at most 100 times. The
 * CLI applies them when reading standard input.
 *
 * @example
 * ```ts
 * import { UNTRUSTED_LIMITS } from "./limits.ts";
 * import assert from "node:assert/strict";
 * assert.equal(UNTRUSTED_LIMITS.maxCompressionRatio, 100);
 * ```
 */
export const UNTRUSTED_LIMITS: Readonly<DecodeLimits> = Object.freeze({
  maxDecodedBytes: 16 * 2 ** 30,
  maxCompressionRatio: 100,
});

/**
 * Fills in defaults and checks each cap is a positive safe integer.
 *
 * @example
 * ```ts
 * import { resolveLimits } from "./limits.ts";
 * import assert from "node:assert/strict";
 * assert.equal(resolveLimits({ maxRank: 4 }).maxRank, 4);
 * assert.equal(resolveLimits().maxTensors, 1_000_000);
 * ```
 */
export function resolveLimits(limits: DecodeLimits = {}): Required<DecodeLimits> {
  const out = {
    maxTensorBytes: limits.maxTensorBytes ?? DEFAULT_LIMITS.maxTensorBytes,
    maxHeaderBytes: limits.maxHeaderBytes ?? DEFAULT_LIMITS.maxHeaderBytes,
    maxRank: limits.maxRank ?? DEFAULT_LIMITS.maxRank,
    maxTensors: limits.maxTensors ?? DEFAULT_LIMITS.maxTensors,
    maxLineBytes: limits.maxLineBytes ?? DEFAULT_LIMITS.maxLineBytes,
    maxDecodedBytes: limits.maxDecodedBytes ?? DEFAULT_LIMITS.maxDecodedBytes,
    maxCompressionRatio: limits.maxCompressionRatio ?? DEFAULT_LIMITS.maxCompressionRatio,
  };
  for (const [k, v] of Object.entries(out)) {
    const unbounded = (k === "maxDecodedBytes" || k === "maxCompressionRatio") && v === Infinity;
    const ok = k === "maxCompressionRatio" ? typeof v === "number" && v > 0 : Number.isSafeInteger(v) && v > 0;
    if (!ok && !unbounded) throw new RangeError(`Invalid limit ${k}: ${v}`);
  }
  return out;
}
