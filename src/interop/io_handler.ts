/**
 * A TF.js `IOHandler` backed by a ckpt file or object: `model.save(ckptHandler(address))` and
 * `tf.loadLayersModel(ckptHandler(address))`, for a path, `s3://bucket/key`, `https://…` (load
 * only) or `{ store, key }`. The module imports TF.js types only, never TF.js itself, so it works
 * with whichever TF.js instance the caller uses.
 *
 * @module
 */
import { checkInteropOptions } from "./_option_names.ts";
import type { io } from "@tensorflow/tfjs-core";
import { basename, dirname, join } from "node:path";
import type { DecodeOptions } from "../format/decode.ts";
import { loadCheckpoint } from "../io/load.ts";
import { locate } from "../io/read.ts";
import { saveCheckpoint, type SaveOptions, type SaveResult, toPath } from "../io/save.ts";
import { describeAddress, type StorageAddress } from "../storage/resolve.ts";
import type { Metadata } from "../format/types.ts";
import { LIMIT_OPTION_NAMES } from "../format/_options.ts";
import { readSha256Sidecar, writeSha256Sidecar } from "./sidecar.ts";
import { artifactsToCheckpoint, checkpointToArtifacts } from "./tfjs_artifacts.ts";
import type { WeightOptions } from "./tfjs_weights.ts";
import { files } from "../runtime/files.ts";
import { thisProcess } from "../runtime/process.ts";

/** Options for {@linkcode ckptHandler}. */
export interface CkptHandlerOptions extends SaveOptions, DecodeOptions, WeightOptions {
  /**
   * Metadata saved with the model (step, epoch, metrics, custom). The model's topology, training
   * config and other TF.js fields are added under `custom["tfjs.artifacts"]`.
   *
   * @default {{ step: 0 }}
   */
  metadata?: Metadata;
  /**
   * Read the written bytes back and check them (every digest, and the SHA-256 of the whole
   * file). For a local file this happens before they replace it, so a save that does not verify
   * leaves the old file; object stores have no rename, so there the object is replaced (whole, as
   * the store publishes it) and then read back, and a save that does not verify throws.
   *
   * @default {true}
   */
  verify?: boolean;
  /**
   * Also write `NAME.sha256` (the `sha256sum` line) beside the checkpoint after saving, on the
   * same store, and check the checkpoint against it when loading.
   *
   * @default {false}
   */
  sidecar?: boolean;
}

/** An `IOHandler` for one ckpt file or object, which also tells what its last save wrote. */
export interface CkptHandler extends io.IOHandler {
  /** The file this handler reads and writes: its path, or the object's URL on other stores. */
  readonly path: string;
  /** Bytes and SHA-256 of the last successful save through this handler. */
  readonly lastSave: SaveResult | undefined;
  /** Saves model artifacts into the file. */
  save(artifacts: io.ModelArtifacts): Promise<io.SaveResult>;
  /** Loads model artifacts from the file. */
  load(): Promise<io.ModelArtifacts>;
}

function byteLength(value: unknown): number {
  return value == null ? 0 : new TextEncoder().encode(JSON.stringify(value)).byteLength;
}

/** What TF.js expects `save` to return. */
function saveResult(artifacts: io.ModelArtifacts): io.SaveResult {
  const buffers = artifacts.weightData === undefined
    ? []
    : Array.isArray(artifacts.weightData)
    ? artifacts.weightData
    : [artifacts.weightData];
  return {
    modelArtifactsInfo: {
      dateSaved: new Date(),
      modelTopologyType: "JSON",
      modelTopologyBytes: byteLength(artifacts.modelTopology),
      weightSpecsBytes: byteLength(artifacts.weightSpecs),
      weightDataBytes: buffers.reduce((n, b) => n + b.byteLength, 0),
    },
  };
}

/**
 * A TF.js `IOHandler` that saves a model (topology, training config, weights, and optimizer
 * weights with `includeOptimizer: true`) as a ckpt checkpoint through ckpt's streams, and loads
 * it back. `address` is a path, a `file:` URL, `s3://bucket/key`, `https://…` (for loading) or
 * `{ store, key }`; settings for `s3://` go in `storage`. Saving to a path writes a temporary
 * file beside it, verifies it, then renames it over the target; saving to another store writes
 * the object (atomically, by the store) and then reads it back to verify it. Works with
 * `model.save(handler)` and `tf.loadLayersModel(handler)`.
 *
 * @example
 * ```ts
 * import { ckptHandler } from "./io_handler.ts";
 * import { loadCheckpoint } from "../../mod.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const handler = ckptHandler(`${dir}/model.ckpt`, { metadata: { step: 10 } });
 * // What model.save(handler) passes in:
 * await handler.save({
 *   modelTopology: { class_name: "Sequential", config: {} },
 *   weightSpecs: [{ name: "dense/bias", shape: [2], dtype: "float32" }],
 *   weightData: new Float32Array([0.5, -1]).buffer,
 * });
 * const ckpt = await loadCheckpoint(`${dir}/model.ckpt`);
 * assert.equal(ckpt.metadata.step, 10);
 * const artifacts = await handler.load();
 * assert.deepEqual(artifacts.modelTopology, { class_name: "Sequential", config: {} });
 * assert.deepEqual(new Float32Array(artifacts.weightData as ArrayBuffer), new Float32Array([0.5, -1]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 *
 * @example On any store: memory here, `s3://bucket/run/model.ckpt` alike
 * ```ts
 * import { ckptHandler } from "./io_handler.ts";
 * import { MemoryStore } from "../storage/memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore({ name: "models" });
 * const handler = ckptHandler({ store, key: "v1/model.ckpt" }, { sidecar: true });
 * await handler.save({
 *   modelTopology: { class_name: "Sequential", config: {} },
 *   weightSpecs: [{ name: "dense/bias", shape: [1], dtype: "float32" }],
 *   weightData: new Float32Array([2]).buffer,
 * });
 * assert.equal(handler.path, "memory://models/v1/model.ckpt");
 * assert.ok(await store.head("v1/model.ckpt.sha256"));
 * const artifacts = await handler.load();
 * assert.deepEqual(new Float32Array(artifacts.weightData as ArrayBuffer), new Float32Array([2]));
 * ```
 */
export function ckptHandler(address: StorageAddress, options: CkptHandlerOptions = {}): CkptHandler {
  checkInteropOptions("handler", options, "Cannot make a TF.js handler");
  const object = locate(address, options, "use a TF.js handler on");
  const local = object.store.files;
  const file = local && (typeof address === "string" || address instanceof URL)
    ? toPath(address)
    : local
    ? local.path(object.key)
    : describeAddress(object);
  const verify = options.verify ?? true;
  // Each function gets only the options it knows (they reject others). A codec object used to
  // save must also be recognised when loading.
  const save: SaveOptions = { codec: options.codec, compression: options.compression, sync: options.sync };
  const sidecarOptions = { sync: options.sync, ...(options.storage ? { storage: options.storage } : {}) };
  const read: DecodeOptions = {
    codecs: [...(options.codecs ?? []), ...(typeof options.codec === "object" ? [options.codec] : [])],
  };
  for (const name of LIMIT_OPTION_NAMES) read[name] = options[name];
  let lastSave: SaveResult | undefined;
  return {
    path: file,
    get lastSave() {
      return lastSave;
    },
    async save(artifacts: io.ModelArtifacts): Promise<io.SaveResult> {
      const ckpt = artifactsToCheckpoint(artifacts, options.metadata ?? { step: 0 });
      if (!local) {
        // No rename: the store publishes the object whole, then it is read back.
        const result = await saveCheckpoint(object, ckpt, { ...save, sha256sum: options.sidecar ?? false });
        if (verify) await loadCheckpoint(object, { ...read, sha256: result.digest });
        if (options.sidecar) await writeSha256Sidecar(object, result.sha256!, sidecarOptions);
        lastSave = result;
        return saveResult(artifacts);
      }
      const tmp = join(dirname(file), `.${basename(file)}.save-${thisProcess.pid}-${crypto.randomUUID().slice(0, 8)}`);
      try {
        const result = await saveCheckpoint(tmp, ckpt, { ...save, sha256sum: options.sidecar ?? false });
        if (verify) await loadCheckpoint(tmp, { ...read, sha256: result.digest });
        await files.rename(tmp, file);
        if (options.sync ?? true) {
          const d = await files.open(dirname(file), { read: true });
          try {
            await d.sync();
          } finally {
            d.close();
          }
        }
        if (options.sidecar) await writeSha256Sidecar(file, result.sha256!, sidecarOptions);
        lastSave = result;
      } catch (e) {
        await files.remove(tmp).catch(() => {});
        throw e;
      }
      return saveResult(artifacts);
    },
    async load(): Promise<io.ModelArtifacts> {
      const sha256 = options.sidecar ? await readSha256Sidecar(object) : undefined;
      const ckpt = await loadCheckpoint(object, sha256 === undefined ? read : { ...read, sha256 });
      return checkpointToArtifacts(ckpt, options);
    },
  };
}
