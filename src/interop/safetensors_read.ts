/**
 * Reading `.safetensors` objects by range from any address: a path, a `file:`, `https://` or
 * `s3://` URL, or `{ store, key }`. The header comes from the object's leading bytes (one request
 * when it is under 64 KiB), then each wanted tensor from its own byte range.
 *
 * @module
 */
import { checkInteropOptions } from "./_option_names.ts";
import type { DecodeLimits } from "../format/limits.ts";
import type { Checkpoint } from "../format/types.ts";
import { openAddress, type StorageOptions } from "../io/read.ts";
import type { StorageAddress } from "../storage/resolve.ts";
import { readSafetensorsHeaderFrom, readSafetensorsTensorsFrom, type SafetensorsHeader } from "./safetensors.ts";

/** Options for {@linkcode readSafetensorsHeader} and {@linkcode readSafetensorsTensors}: the caps, and settings for the store an address names. */
export interface ReadSafetensorsOptions extends DecodeLimits, StorageOptions {}

/**
 * Reads and validates a `.safetensors` object's header, and checks the object's length against
 * it, without reading tensor data. Its `tensors` can serve as descriptors for
 * `createSafetensorsCodec`. Over HTTP or S3 this is two range requests (the object's tail, which
 * tells its size, and its head).
 *
 * @example
 * ```ts
 * import { readSafetensorsHeader } from "./safetensors_read.ts";
 * import { safetensorsCodec } from "./safetensors.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * await saveCheckpoint(path, {
 *   metadata: { step: 4 },
 *   tensors: [{ name: "b", dtype: "int64", shape: [1], data: new BigInt64Array([5n]), group: "buffers" }],
 * }, { codec: safetensorsCodec });
 * const h = await readSafetensorsHeader(path);
 * assert.deepEqual(h.tensors.map((t) => [t.name, t.dtype, t.group]), [["b", "int64", "buffers"]]);
 * await Deno.remove(path);
 * ```
 */
export async function readSafetensorsHeader(
  address: StorageAddress,
  options: ReadSafetensorsOptions = {},
): Promise<SafetensorsHeader> {
  checkInteropOptions("safetensors", options, "Cannot read safetensors header");
  return await readSafetensorsHeaderFrom(await openAddress(address, options), options);
}

/**
 * Loads some tensors of a `.safetensors` object by name: reads the header, then only the byte
 * ranges of the named tensors. Tensors come in file order. A name the object lacks is a
 * `RangeError`. The header and the object's length are checked as a full load checks them, but
 * the bytes of tensors not named are never read, so what only their bytes could show goes
 * unchecked: a bool tensor holding a byte other than 0 or 1 is rejected by a full load and when
 * it is named, not when it is skipped (safetensors has no digests to catch anything else).
 *
 * @example
 * ```ts
 * import { readSafetensorsTensors } from "./safetensors_read.ts";
 * import { safetensorsCodec } from "./safetensors.ts";
 * import { saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const path = await Deno.makeTempFile();
 * await saveCheckpoint(path, {
 *   metadata: { step: 1 },
 *   tensors: [
 *     { name: "a", dtype: "uint8", shape: [2], data: new Uint8Array([1, 2]) },
 *     { name: "b", dtype: "uint8", shape: [1], data: new Uint8Array([3]) },
 *   ],
 * }, { codec: safetensorsCodec });
 * const some = await readSafetensorsTensors(path, ["b"]);
 * assert.deepEqual(some.tensors.map((t) => [t.name, [...t.data]]), [["b", [3]]]);
 * await Deno.remove(path);
 * ```
 */
export async function readSafetensorsTensors(
  address: StorageAddress,
  names: readonly string[],
  options: ReadSafetensorsOptions = {},
): Promise<Checkpoint> {
  checkInteropOptions("safetensors", options, "Cannot load safetensors");
  if (!Array.isArray(names) || names.some((n) => typeof n !== "string")) {
    throw new TypeError("Cannot load safetensors: names must be an array of strings");
  }
  return await readSafetensorsTensorsFrom(await openAddress(address, options), names, options);
}
