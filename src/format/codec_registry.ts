/**
 * The codecs every reader recognises from the bytes, after the caller's own `codecs`: ckpt binary
 * and ckpt JSON Lines from the start, then those an upper layer registers. The format layer
 * detects codecs only through this list; it never imports the layers that know other formats
 * (the interop layer registers safetensors when it loads: `src/interop/read_codecs.ts`, which
 * every entry point imports).
 *
 * @module
 */
import type { Codec } from "./codec.ts";
import { BUILTIN_CODECS } from "./encode.ts";

const registered: Codec[] = [...Object.values(BUILTIN_CODECS)];

/**
 * Adds `codec` to those every reader recognises, after the ones there already; adding one that
 * is there changes nothing.
 *
 * @example
 * ```ts
 * import { readCodecs, registerReadCodec } from "./codec_registry.ts";
 * import { binaryCodec } from "./codecs/binary.ts";
 * import assert from "node:assert/strict";
 * const before = readCodecs().length;
 * registerReadCodec(binaryCodec); // there from the start
 * assert.equal(readCodecs().length, before);
 * ```
 */
export function registerReadCodec(codec: Codec): void {
  if (!registered.includes(codec)) registered.push(codec);
}

/**
 * The codecs recognised by default, in the order they are tried: ckpt binary, ckpt JSON Lines,
 * then those registered (safetensors, once the interop layer has loaded).
 *
 * @example
 * ```ts
 * import { readCodecs } from "./codec_registry.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(readCodecs().slice(0, 2).map((c) => c.name), ["binary", "json"]);
 * ```
 */
export function readCodecs(): readonly Codec[] {
  return registered;
}
