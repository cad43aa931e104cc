/**
 * The formats every reader recognises from the bytes: ckpt binary and ckpt JSON Lines, which the
 * format layer knows, and safetensors, which this module registers with the format layer's
 * registry when it loads. Every entry point imports it (`mod.ts`, `./interop`, `./testing`, the
 * CLI), so a load through any of them recognises safetensors; the format layer itself never
 * imports this layer.
 *
 * @module
 */
import type { Codec } from "../format/codec.ts";
import { registerReadCodec } from "../format/codec_registry.ts";
import { BUILTIN_CODECS } from "../format/encode.ts";
import { safetensorsCodec } from "./safetensors.ts";

registerReadCodec(safetensorsCodec);

/**
 * The codecs every reader recognises from the bytes, in the order they are tried (after the
 * caller's own `codecs`): ckpt binary, ckpt JSON Lines, safetensors.
 *
 * @example
 * ```ts
 * import { DEFAULT_READ_CODECS } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(DEFAULT_READ_CODECS.map((c) => c.name), ["binary", "json", "safetensors"]);
 * ```
 */
export const DEFAULT_READ_CODECS: readonly Codec[] = Object.freeze([
  ...Object.values(BUILTIN_CODECS),
  safetensorsCodec,
]);
