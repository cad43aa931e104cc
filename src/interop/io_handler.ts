/**
 * A TF.js `IOHandler` backed by a ckpt file: `model.save(ckptHandler(path))` and
 * `tf.loadLayersModel(ckptHandler(path))`. The module imports TF.js types only, never TF.js
 * itself, so it works with whichever TF.js instance the caller uses.
 *
 * @module
 */
import type { io } from "@tensorflow/tfjs-core";
import { basename, dirname, join } from "node:path";
import type { DecodeOptions } from "../format/decode.ts";
import { loadCheckpoint } from "../io/load.ts";
import { saveCheckpoint, type SaveOptions, type SaveResult, toPath } from "../io/save.ts";
import type { Metadata } from "../format/types.ts";
import { LIMIT_OPTION_NAMES } from "../format/_options.ts";
import { readSha256Sidecar, writeSha256Sidecar } from "./sidecar.ts";
import { artifactsToCheckpoint, checkpointToArtifacts } from "./tfjs_artifacts.ts";
import type { WeightOptions } from "./tfjs_weights.ts";

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
   * file) before they replace `path`, so a save that does not verify leaves the old file.
   *
   * @default {true}
   */
  verify?: boolean;
  /**
   * Also write `PATH.sha256` (the `sha256sum` line) after saving, and check the file against it
   * when loading.
   *
   * @default {false}
   */
  sidecar?: boolean;
}

/** An `IOHandler` for one ckpt file, which also tells what its last save wrote. */
export interface CkptHandler extends io.IOHandler {
  /** The file this handler reads and writes. */
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

/**
 * A TF.js `IOHandler` that saves a model (topology, training config, weights, and optimizer
 * weights with `includeOptimizer: true`) as a ckpt checkpoint through ckpt's streams, and loads
 * it back. Saving writes a temporary file beside `path`, verifies it, then renames it over
 * `path`. Works with `model.save(handler)` and `tf.loadLayersModel(handler)`.
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
 */
export function ckptHandler(path: string | URL, options: CkptHandlerOptions = {}): CkptHandler {
  const file = toPath(path);
  const verify = options.verify ?? true;
  // Each function gets only the options it knows (they reject others). A codec object used to
  // save must also be recognised when loading.
  const save: SaveOptions = { codec: options.codec, compression: options.compression, sync: options.sync };
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
      const tmp = join(dirname(file), `.${basename(file)}.save-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`);
      try {
        const result = await saveCheckpoint(tmp, ckpt, { ...save, sha256sum: options.sidecar ?? false });
        if (verify) await loadCheckpoint(tmp, { ...read, sha256: result.digest });
        await Deno.rename(tmp, file);
        if (options.sync ?? true) {
          const d = await Deno.open(dirname(file), { read: true });
          try {
            await d.sync();
          } finally {
            d.close();
          }
        }
        if (options.sidecar) await writeSha256Sidecar(file, result.sha256!, options);
        lastSave = result;
      } catch (e) {
        await Deno.remove(tmp).catch(() => {});
        throw e;
      }
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
    },
    async load(): Promise<io.ModelArtifacts> {
      const sha256 = options.sidecar ? await readSha256Sidecar(file) : undefined;
      const ckpt = await loadCheckpoint(file, sha256 === undefined ? read : { ...read, sha256 });
      return checkpointToArtifacts(ckpt, options);
    },
  };
}
