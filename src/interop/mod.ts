/**
 * Interop: read and write `.safetensors` as a ckpt codec, `sha256sum` sidecars, TF.js model
 * artifacts (`model.json` + weight shards), and a TF.js `IOHandler` backed by a ckpt file.
 * Nothing here imports TF.js at run time (only its types), and the safetensors and sidecar
 * modules do not even import its types. Wherever a path is taken, so is any storage address:
 * `s3://bucket/key`, `https://…` (for reading), `opfs:` in a browser, or `{ store, key }`.
 *
 * @example
 * ```ts
 * import { readSafetensorsTensors, safetensorsCodec, writeSha256Sidecar } from "./mod.ts";
 * import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const path = `${dir}/model.safetensors`;
 * const { sha256 } = await saveCheckpoint(path, {
 *   metadata: { step: 100, metrics: { loss: 0.25 } },
 *   tensors: [
 *     { name: "dense/kernel", dtype: "float32", shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) },
 *     { name: "dense/bias", dtype: "float32", shape: [2], data: new Float32Array([0, 1]) },
 *   ],
 * }, { codec: safetensorsCodec, sha256sum: true });
 * await writeSha256Sidecar(path, sha256!); // `sha256sum -c model.safetensors.sha256` accepts it
 * const all = await loadCheckpoint(path, { sha256 });
 * assert.equal(all.metadata.step, 100);
 * const bias = await readSafetensorsTensors(path, ["dense/bias"]);
 * assert.deepEqual(bias.tensors[0]!.data, new Float32Array([0, 1]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @module
 */
export { DEFAULT_READ_CODECS } from "./read_codecs.ts"; // registers safetensors: every load recognises it
export {
  createSafetensorsCodec,
  decodeSafetensorsHeader,
  decodeSafetensorsLength,
  encodeSafetensorsHeader,
  SAFETENSORS_DTYPES,
  SAFETENSORS_PREFIX_BYTES,
  safetensorsCodec,
  type SafetensorsCodecOptions,
  type SafetensorsEntry,
  type SafetensorsHeader,
  type SafetensorsTensorDescriptor,
} from "./safetensors.ts";
export { readSafetensorsHeader, type ReadSafetensorsOptions, readSafetensorsTensors } from "./safetensors_read.ts";
export {
  CKPT_KEY_PREFIX,
  FOREIGN_METADATA_KEY,
  metadataFromSafetensors,
  metadataToSafetensors,
} from "./safetensors_metadata.ts";
export { MAX_SIDECAR_BYTES, readSha256Sidecar, type SidecarOptions, writeSha256Sidecar } from "./sidecar.ts";
export {
  needsNarrowing,
  tensorToWeight,
  type Weight,
  weightByteLength,
  type WeightOptions,
  type WeightSpec,
  weightToTensor,
} from "./tfjs_weights.ts";
export {
  artifactsToCheckpoint,
  checkpointToArtifacts,
  DEFAULT_SHARD_BYTES,
  readTfjsArtifacts,
  readTfjsArtifactsChecked,
  type ReadTfjsOptions,
  type ShardRead,
  TFJS_FIELDS,
  TFJS_KEY,
  writeTfjsArtifacts,
  type WriteTfjsOptions,
  type WriteTfjsResult,
} from "./tfjs_artifacts.ts";
export { type CkptHandler, ckptHandler, type CkptHandlerOptions } from "./io_handler.ts";
