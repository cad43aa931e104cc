/**
 * TF.js model artifacts: a checkpoint as `model.json` plus `weights.bin` shards (what
 * `tf.loadLayersModel` and `tf.io.loadWeights` read) and back, and the mapping between a
 * checkpoint and the `ModelArtifacts` object that TF.js IOHandlers pass around.
 *
 * The TF.js fields of a model (topology, training config, format, ...) live in the checkpoint's
 * `metadata.custom["tfjs.artifacts"]`. `model.json` carries them at its top level as TF.js
 * expects, plus a `"ckpt"` object that TF.js ignores: the rest of the metadata, the original
 * dtype of each converted tensor, groups other than params/optimizer, and each shard's size and
 * SHA-256, so that importing gives back exactly what was exported.
 *
 * @module
 */
import type { io } from "@tensorflow/tfjs-core";
import { dirname, isAbsolute, join, sep as SEP } from "node:path";
import type { DecodeOptions } from "../format/decode.ts";
import { type CheckpointSource, decodeCheckpoint } from "../io/read.ts";
import { checkTensorName, isDType } from "../format/dtype.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import { resolveLimits } from "../format/limits.ts";
import { metadataFromJson, metadataToJson } from "../format/metadata.ts";
import { toPath, writeFileAtomic } from "../io/save.ts";
import type { Checkpoint, CheckpointInput, DType, JsonValue, Metadata, Tensor, TensorInput } from "../format/types.ts";
import { ChunkReader } from "../format/_chunk_reader.ts";
import { sha256 } from "../format/_hash.ts";
import {
  tensorToWeight,
  weightByteLength,
  type WeightOptions,
  type WeightSpec,
  weightToTensor,
} from "./tfjs_weights.ts";

/** The `metadata.custom` key holding a model's TF.js fields. */
export const TFJS_KEY = "tfjs.artifacts";
/** The `ModelArtifacts` fields kept in `metadata.custom["tfjs.artifacts"]`, in this order. */
export const TFJS_FIELDS = [
  "format",
  "generatedBy",
  "convertedBy",
  "modelTopology",
  "trainingConfig",
  "signature",
  "userDefinedMetadata",
  "modelInitializer",
  "initializerSignature",
] as const;
/** Default shard size, as TF.js uses: 4 MiB. */
export const DEFAULT_SHARD_BYTES = 4 * 2 ** 20;

type ModelArtifacts = io.ModelArtifacts;

function fieldsOf(metadata: Metadata): Record<string, JsonValue> | undefined {
  const v = metadata.custom !== undefined && Object.hasOwn(metadata.custom, TFJS_KEY)
    ? metadata.custom[TFJS_KEY]
    : undefined;
  if (v === undefined) return undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new TypeError(
      `Invalid metadata: custom[${JSON.stringify(TFJS_KEY)}] must be an object of TF.js model fields`,
    );
  }
  const extra = Object.keys(v).find((k) => !(TFJS_FIELDS as readonly string[]).includes(k));
  if (extra !== undefined) {
    throw new TypeError(
      `Invalid metadata: custom[${JSON.stringify(TFJS_KEY)}] has unknown field ${JSON.stringify(extra)}`,
    );
  }
  return v;
}

/**
 * A checkpoint from the `ModelArtifacts` a TF.js model saves: one tensor per weight spec (group
 * `"optimizer"` for optimizer weights, else `"params"`), viewing `weightData` without copying,
 * and the model's JSON fields in `metadata.custom["tfjs.artifacts"]`. `metadata` supplies the
 * rest (step 0 by default). Throws a `TypeError` for a GraphDef (binary) topology and a
 * `SyntaxError` when the weight data does not match the specs.
 *
 * @example
 * ```ts
 * import { artifactsToCheckpoint } from "./tfjs_artifacts.ts";
 * import assert from "node:assert/strict";
 * const ckpt = artifactsToCheckpoint({
 *   modelTopology: { class_name: "Sequential" },
 *   weightSpecs: [{ name: "w", shape: [2], dtype: "float32" }],
 *   weightData: new Float32Array([1, 2]).buffer,
 * }, { step: 5 });
 * assert.deepEqual(ckpt.metadata, { step: 5, custom: { "tfjs.artifacts": { modelTopology: { class_name: "Sequential" } } } });
 * assert.deepEqual(ckpt.tensors[0]!.data, new Float32Array([1, 2]));
 * ```
 */
export function artifactsToCheckpoint(artifacts: ModelArtifacts, metadata: Metadata = { step: 0 }): Checkpoint {
  if (typeof artifacts !== "object" || artifacts === null) {
    throw new TypeError("Invalid model artifacts: expected an object");
  }
  if (artifacts.modelTopology instanceof ArrayBuffer) {
    throw new TypeError("Cannot store model artifacts: a binary (GraphDef) topology is not supported, only JSON");
  }
  const fields: Record<string, JsonValue> = {};
  for (const k of TFJS_FIELDS) {
    const v = (artifacts as Record<string, unknown>)[k];
    if (v !== undefined) fields[k] = JSON.parse(JSON.stringify(v)) as JsonValue;
  }
  const specs = artifacts.weightSpecs ?? [];
  const buffers = artifacts.weightData === undefined
    ? []
    : Array.isArray(artifacts.weightData)
    ? artifacts.weightData
    : [artifacts.weightData];
  const data = buffers.length === 1 ? new Uint8Array(buffers[0]!) : concat(buffers.map((b) => new Uint8Array(b)));
  const tensors: Tensor[] = [];
  let offset = 0;
  for (const spec of specs) {
    const n = weightByteLength(spec);
    if (offset + n > data.byteLength) {
      throw new SyntaxError(
        `Cannot store model artifacts: weight ${
          JSON.stringify(spec.name)
        } needs ${n} bytes at offset ${offset}, but the weight data has ${data.byteLength}`,
      );
    }
    tensors.push(weightToTensor(spec, data.subarray(offset, offset + n)));
    offset += n;
  }
  if (offset !== data.byteLength) {
    throw new SyntaxError(
      `Cannot store model artifacts: the weight specs cover ${offset} bytes of ${data.byteLength} at offset ${offset}`,
    );
  }
  const custom = { ...metadata.custom, [TFJS_KEY]: fields };
  return { metadata: { ...metadata, custom }, tensors };
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * The `ModelArtifacts` TF.js loads from a checkpoint: the fields kept in
 * `metadata.custom["tfjs.artifacts"]`, a weight spec per tensor (converted as
 * {@linkcode tensorToWeight} says) and all weight bytes in one `ArrayBuffer`.
 *
 * @example
 * ```ts
 * import { checkpointToArtifacts } from "./tfjs_artifacts.ts";
 * import assert from "node:assert/strict";
 * const a = checkpointToArtifacts({
 *   metadata: { step: 1 },
 *   tensors: [{ name: "iter", dtype: "int32", shape: [], data: new Int32Array([3]), group: "optimizer" }],
 * });
 * assert.deepEqual(a.weightSpecs, [{ name: "iter", shape: [], dtype: "int32", group: "optimizer" }]);
 * assert.equal((a.weightData as ArrayBuffer).byteLength, 4);
 * ```
 */
export function checkpointToArtifacts(
  checkpoint: Checkpoint | { metadata: Metadata; tensors: TensorInput[] },
  options: WeightOptions = {},
): ModelArtifacts {
  const fields = fieldsOf(checkpoint.metadata) ?? {};
  const weights = checkpoint.tensors.map((t) => tensorToWeight(t, options));
  return {
    ...(fields as Partial<ModelArtifacts>),
    weightSpecs: weights.map((w) => w.spec),
    weightData: concat(weights.map((w) => w.bytes)).buffer as ArrayBuffer,
  };
}

/** Options for {@linkcode writeTfjsArtifacts}. */
export interface WriteTfjsOptions extends WeightOptions, DecodeOptions {
  /**
   * Largest shard file, in bytes. One shard is named `weights.bin`; several are
   * `weights-shard1ofN.bin` and so on. Tensors may span shards, as TF.js allows.
   *
   * @default {4194304} (4 MiB)
   */
  shardBytes?: number;
  /**
   * Flush files and the directory to disk before resolving.
   *
   * @default {true}
   */
  sync?: boolean;
}

/** What {@linkcode writeTfjsArtifacts} wrote. */
export interface WriteTfjsResult {
  /** Path of `model.json`. */
  modelJson: string;
  /** Paths of the shards, in order. */
  shards: string[];
  /** Bytes of weight data in all shards. */
  weightBytes: number;
}

/** The `"ckpt"` object in a `model.json`. */
interface CkptRecord {
  version: 1;
  metadata: JsonValue;
  dtypes?: Record<string, DType>;
  groups?: Record<string, string>;
  shards: { path: string; bytes: number; sha256: string }[];
}

function isCheckpointInput(x: unknown): x is CheckpointInput {
  return typeof x === "object" && x !== null && !(x instanceof Uint8Array) && !(x instanceof ReadableStream) &&
    !(x instanceof URL) && "metadata" in x && "tensors" in x;
}

async function* tensorsOf(
  source: CheckpointInput | CheckpointSource,
  options: DecodeOptions,
  meta: (m: Metadata) => void,
): AsyncGenerator<TensorInput> {
  if (isCheckpointInput(source)) {
    meta(source.metadata);
    yield* source.tensors as AsyncIterable<TensorInput>;
    return;
  }
  for await (const r of decodeCheckpoint(source, options)) {
    if (r.type === "metadata") meta(r.metadata);
    else yield r.tensor;
  }
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.byteLength) off += await file.write(bytes.subarray(off));
}

/**
 * Exports a checkpoint as TF.js artifacts in `dir`: `model.json` and the weight shards. The
 * checkpoint may be given whole or as a source to decode (a path, bytes, a stream); tensors are
 * written one at a time, so memory holds one tensor plus the manifest. Shards are written under
 * temporary names and renamed, then `model.json` is replaced atomically; its `"ckpt"` object
 * records each shard's SHA-256, so a mix of old and new files after a crash is detected on
 * import. Throws a `TypeError` for dtypes TF.js cannot hold unless `narrow` is set.
 *
 * @example
 * ```ts
 * import { readTfjsArtifacts, writeTfjsArtifacts } from "./tfjs_artifacts.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * const out = await writeTfjsArtifacts(dir, {
 *   metadata: { step: 9 },
 *   tensors: [{ name: "w", dtype: "int8", shape: [2], data: new Int8Array([-1, 1]) }],
 * });
 * assert.deepEqual(out.shards, [`${dir}/weights.bin`]);
 * const back = await readTfjsArtifacts(out.modelJson);
 * assert.deepEqual(back.tensors[0]!.data, new Int8Array([-1, 1]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeTfjsArtifacts(
  dir: string | URL,
  checkpoint: CheckpointInput | CheckpointSource,
  options: WriteTfjsOptions = {},
): Promise<WriteTfjsResult> {
  const root = toPath(dir);
  const shardBytes = options.shardBytes ?? DEFAULT_SHARD_BYTES;
  if (!Number.isSafeInteger(shardBytes) || shardBytes <= 0) throw new RangeError(`Invalid shardBytes: ${shardBytes}`);
  const sync = options.sync ?? true;
  await Deno.mkdir(root, { recursive: true });
  const tag = `${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const temps: string[] = [];
  const shards: { bytes: number; sha256: string }[] = [];
  let file: Deno.FsFile | undefined;
  let hash = sha256();
  let fill = 0;
  const closeShard = async (): Promise<void> => {
    if (!file) return;
    if (sync) await file.syncData();
    file.close();
    file = undefined;
    shards.push({ bytes: fill, sha256: hash.digest("hex") });
  };
  const write = async (bytes: Uint8Array): Promise<void> => {
    let off = 0;
    while (off < bytes.byteLength) {
      if (!file || fill === shardBytes) {
        await closeShard();
        const tmp = join(root, `.weights.tmp-${tag}-${temps.length}`);
        temps.push(tmp);
        file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o644 });
        hash = sha256();
        fill = 0;
      }
      const n = Math.min(shardBytes - fill, bytes.byteLength - off);
      const part = bytes.subarray(off, off + n);
      hash.update(part);
      await writeAll(file, part);
      fill += n;
      off += n;
    }
  };
  let metadata: Metadata | undefined;
  const specs: WeightSpec[] = [];
  const dtypes: Record<string, DType> = {};
  const groups: Record<string, string> = {};
  const names = new Set<string>();
  let weightBytes = 0;
  const finals: string[] = [];
  try {
    for await (const t of tensorsOf(checkpoint, options, (m) => (metadata = m))) {
      if (names.has(t.name)) {
        throw new TypeError(`Cannot export to TF.js: duplicate tensor name ${JSON.stringify(t.name)}`);
      }
      names.add(t.name);
      const w = tensorToWeight(t, options);
      specs.push(w.spec);
      if (w.original) dtypes[t.name] = w.original;
      const g = t.group ?? "params";
      if (g !== "params" && g !== "optimizer") groups[t.name] = g;
      await write(w.bytes);
      weightBytes += w.bytes.byteLength;
    }
    if (!metadata) throw new TypeError("Cannot export to TF.js: no metadata");
    await closeShard();
    const n = temps.length;
    for (let i = 0; i < n; i++) finals.push(n === 1 ? "weights.bin" : `weights-shard${i + 1}of${n}.bin`);
    const fields = fieldsOf(metadata) ?? {};
    const canonical = JSON.parse(metadataToJson(metadata)) as Record<string, JsonValue>;
    if (metadata.custom && Object.hasOwn(metadata.custom, TFJS_KEY)) {
      (canonical.custom as Record<string, JsonValue>)[TFJS_KEY] = null; // kept at the top level of model.json
    }
    const record: CkptRecord = {
      version: 1,
      metadata: canonical,
      ...(Object.keys(dtypes).length ? { dtypes } : {}),
      ...(Object.keys(groups).length ? { groups } : {}),
      shards: shards.map((s, i) => ({ path: finals[i]!, ...s })),
    };
    const modelJson: Record<string, unknown> = { ...fields };
    if (fields.modelTopology !== undefined && fields.format === undefined) modelJson.format = "layers-model";
    modelJson.weightsManifest = [{ paths: finals, weights: specs }];
    modelJson.ckpt = record;
    for (let i = 0; i < n; i++) await Deno.rename(temps[i]!, join(root, finals[i]!));
    temps.length = 0;
    const text = new TextEncoder().encode(JSON.stringify(modelJson));
    const path = join(root, "model.json");
    await writeFileAtomic(path, (f) => writeAll(f, text), { sync });
    return { modelJson: path, shards: finals.map((f) => join(root, f)), weightBytes };
  } catch (e) {
    try {
      file?.close();
    } catch { /* already closed */ }
    for (const t of temps) await Deno.remove(t).catch(() => {});
    throw e;
  }
}

/** Options for {@linkcode readTfjsArtifacts}. */
export interface ReadTfjsOptions extends DecodeOptions {
  /**
   * Read shards whose real path (symbolic links resolved) lies outside the directory of
   * `model.json`. Off by default, so that artifacts from elsewhere (an unpacked archive, a
   * download) cannot make the reader open other files through links.
   *
   * @default {false}
   */
  allowOutsideShards?: boolean;
}

/** The value of an own property, never one inherited from `Object.prototype` (`toString`...). */
function own<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}

/**
 * Refuses anything but a regular file (a FIFO would block the reader forever). For a name taken
 * from `model.json` (`fromManifest`), a name the file system refuses (too long, say) is reported
 * as a bad name; a missing file stays `Deno.errors.NotFound`.
 */
async function regularFile(path: string, what: string, fromManifest = false): Promise<Deno.FileInfo> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (e) {
    if (!fromManifest || e instanceof Deno.errors.NotFound) throw e;
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${what} cannot be read (${(e as Error).message})`, {
      cause: e,
    });
  }
  if (!info.isFile) throw new SyntaxError(`Cannot decode TF.js artifacts: ${what} is not a regular file`);
  return info;
}

function checkRelative(p: unknown, where: string): string {
  if (typeof p !== "string" || p.length === 0) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${where} is not a file name`);
  }
  if (
    isAbsolute(p) || p.includes("\\") || p.includes("\0") || /^[a-z][a-z0-9+.-]*:/i.test(p) ||
    p.split("/").some((s) => s === ".." || s === "")
  ) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${where} ${JSON.stringify(p)} is not a plain relative path`);
  }
  return p;
}

/** The largest piece a shard is read in. */
const SHARD_READ_BYTES = 4 * 2 ** 20;

async function* shardChunks(
  root: string,
  paths: string[],
  record: CkptRecord | undefined,
  allowOutside: boolean,
): AsyncGenerator<Uint8Array> {
  const realRoot = await Deno.realPath(root);
  for (const p of paths) {
    const expected = record?.shards.find((s) => s.path === p);
    if (record && !expected) {
      throw new SyntaxError(
        `Cannot decode TF.js artifacts: shard ${JSON.stringify(p)} is not listed in the "ckpt" record of model.json`,
      );
    }
    const path = join(root, p);
    const { size } = await regularFile(path, `shard ${JSON.stringify(p)}`, true);
    const real = await Deno.realPath(path);
    if (!allowOutside && !real.startsWith(realRoot.endsWith(SEP) ? realRoot : realRoot + SEP)) {
      throw new SyntaxError(
        `Cannot decode TF.js artifacts: shard ${
          JSON.stringify(p)
        } resolves to ${real}, outside the artifacts directory ${realRoot} (allowOutsideShards permits it)`,
      );
    }
    const hash = sha256();
    let bytes = 0;
    const file = await Deno.open(path, { read: true });
    try {
      for (;;) {
        // Sized to what is left, plus one byte that finds the end (or a file that grew) in the same
        // read: a 4 MiB buffer per read cost a small shard 8 MiB of zeroed memory.
        const buf = new Uint8Array(Math.min(SHARD_READ_BYTES, Math.max(0, size - bytes) + 1));
        const n = await file.read(buf);
        if (n === null) break;
        const chunk = buf.subarray(0, n);
        hash.update(chunk);
        bytes += n;
        yield chunk;
      }
    } finally {
      file.close();
    }
    if (expected) {
      const actual = hash.digest("hex");
      if (bytes !== expected.bytes || actual !== expected.sha256) {
        throw new ChecksumMismatchError(
          `TF.js shard ${JSON.stringify(p)}`,
          expected.sha256,
          actual,
          `(${bytes} bytes, expected ${expected.bytes})`,
        );
      }
    }
  }
}

function parseRecord(value: unknown, names: Set<string>): { record: CkptRecord; metadata: Metadata } {
  const fail = (why: string): never => {
    throw new SyntaxError(`Cannot decode TF.js artifacts: invalid "ckpt" object in model.json: ${why}`);
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail("not an object");
  const r = value as Record<string, unknown>;
  if (r.version !== 1) fail(`unsupported version ${JSON.stringify(r.version)}`);
  const metadata = metadataFromJson(r.metadata, 'in model.json "ckpt"');
  const check = (field: string, ok: (v: unknown) => boolean) => {
    const m = r[field];
    if (m === undefined) return;
    if (typeof m !== "object" || m === null || Array.isArray(m)) fail(`${field} is not an object`);
    for (const [k, v] of Object.entries(m as object)) {
      if (!names.has(k)) fail(`${field} names ${JSON.stringify(k)}, which the manifest lacks`);
      if (!ok(v)) fail(`${field} has a bad value for ${JSON.stringify(k)}`);
    }
  };
  check("dtypes", isDType);
  check("groups", (v) => typeof v === "string");
  if (!Array.isArray(r.shards)) fail("shards is not an array");
  for (const s of r.shards as unknown[]) {
    const e = s as Record<string, unknown>;
    if (
      typeof e !== "object" || e === null || typeof e.path !== "string" || !Number.isSafeInteger(e.bytes) ||
      typeof e.sha256 !== "string" || !/^[0-9a-f]{64}$/.test(e.sha256)
    ) fail("a shard entry is not {path, bytes, sha256}");
  }
  return { record: r as unknown as CkptRecord, metadata };
}

/**
 * Imports TF.js artifacts: reads `model.json`, then the weight shards it names (plain relative
 * paths only), one weight at a time. Artifacts exported by ckpt come back exactly as exported
 * (shard digests checked); others get step 0, their model fields in
 * `metadata.custom["tfjs.artifacts"]`, and weights as TF.js would load them (float16-quantized
 * weights stay float16). Throws a `SyntaxError` for malformed JSON, a manifest that does not
 * match the shards, or unsafe paths; a `RangeError` when `model.json` exceeds `maxHeaderBytes`
 * or a weight ckpt cannot hold (string, complex64). When `model.json` has a `"ckpt"` record,
 * every shard must be listed in it and is checked against its size and SHA-256. `model.json` and
 * the shards must be regular files (a FIFO is refused rather than waited on), and a shard whose
 * real path leaves the directory of `model.json` through a symbolic link is refused unless
 * `allowOutsideShards` is set.
 *
 * @example
 * ```ts
 * import { readTfjsArtifacts } from "./tfjs_artifacts.ts";
 * import assert from "node:assert/strict";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeFile(`${dir}/w.bin`, new Uint8Array(new Float32Array([0.5]).buffer));
 * await Deno.writeTextFile(`${dir}/model.json`, JSON.stringify({
 *   modelTopology: {},
 *   weightsManifest: [{ paths: ["w.bin"], weights: [{ name: "b", shape: [1], dtype: "float32" }] }],
 * }));
 * const ckpt = await readTfjsArtifacts(`${dir}/model.json`);
 * assert.deepEqual(ckpt.tensors[0]!.data, new Float32Array([0.5]));
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readTfjsArtifacts(modelJson: string | URL, options: ReadTfjsOptions = {}): Promise<Checkpoint> {
  const lim = resolveLimits(options);
  const path = toPath(modelJson);
  const size = (await regularFile(path, path)).size;
  if (size > lim.maxHeaderBytes) {
    throw new RangeError(
      `Cannot decode TF.js artifacts: model.json of ${size} bytes exceeds maxHeaderBytes ${lim.maxHeaderBytes}`,
    );
  }
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(await Deno.readFile(path)));
  } catch (e) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${path} is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${path} is not a JSON object`);
  }
  const manifest = json.weightsManifest;
  if (!Array.isArray(manifest)) {
    throw new SyntaxError("Cannot decode TF.js artifacts: model.json has no weightsManifest array");
  }
  const groups: { paths: string[]; weights: WeightSpec[]; at: string }[] = manifest.map((g: unknown, i: number) => {
    const group = g as Record<string, unknown>;
    if (typeof group !== "object" || group === null || !Array.isArray(group.paths) || !Array.isArray(group.weights)) {
      throw new SyntaxError(`Cannot decode TF.js artifacts: weightsManifest[${i}] is not {paths, weights}`);
    }
    return {
      paths: group.paths.map((p, j) => checkRelative(p, `weightsManifest[${i}].paths[${j}]`)),
      weights: group.weights as WeightSpec[],
      at: `weightsManifest[${i}]`,
    };
  });
  const names = new Set<string>();
  let count = 0;
  for (const g of groups) {
    for (const [j, w] of g.weights.entries()) {
      if (typeof w !== "object" || w === null || typeof w.name !== "string" || !Array.isArray(w.shape)) {
        throw new SyntaxError("Cannot decode TF.js artifacts: a weight entry is not {name, shape, dtype}");
      }
      const badName = checkTensorName(w.name);
      if (badName) throw new SyntaxError(`Cannot decode TF.js artifacts: ${g.at}.weights[${j}]: ${badName}`);
      if (names.has(w.name)) {
        throw new SyntaxError(`Cannot decode TF.js artifacts: duplicate weight name ${JSON.stringify(w.name)}`);
      }
      names.add(w.name);
      if (w.shape.length > lim.maxRank) {
        throw new RangeError(
          `Cannot decode TF.js artifacts: weight ${
            JSON.stringify(w.name)
          } has rank ${w.shape.length}, over maxRank ${lim.maxRank}`,
        );
      }
      if (weightByteLength(w) > lim.maxTensorBytes) {
        throw new RangeError(
          `Cannot decode TF.js artifacts: weight ${
            JSON.stringify(w.name)
          } exceeds maxTensorBytes ${lim.maxTensorBytes}`,
        );
      }
      if (++count > lim.maxTensors) {
        throw new RangeError(`Cannot decode TF.js artifacts: more than maxTensors ${lim.maxTensors} weights`);
      }
    }
  }
  const parsed = json.ckpt === undefined ? undefined : parseRecord(json.ckpt, names);
  const record = parsed?.record;
  const fields: Record<string, JsonValue> = {};
  for (const k of TFJS_FIELDS) if (json[k] !== undefined) fields[k] = json[k] as JsonValue;
  let metadata: Metadata;
  if (parsed) {
    metadata = parsed.metadata;
    if (metadata.custom && Object.hasOwn(metadata.custom, TFJS_KEY)) metadata.custom[TFJS_KEY] = fields;
  } else {
    metadata = { step: 0, custom: { [TFJS_KEY]: fields } };
  }
  const root = dirname(path);
  const tensors: Tensor[] = [];
  for (const g of groups) {
    const reader = new ChunkReader(
      shardChunks(root, g.paths, record, options.allowOutsideShards ?? false),
      "TF.js weights",
    );
    try {
      for (const spec of g.weights) {
        const bytes = await reader.readExact(weightByteLength(spec), `weight ${JSON.stringify(spec.name)}`);
        const original = own(record?.dtypes, spec.name);
        const t = weightToTensor(spec, bytes, original);
        const group = own(record?.groups, spec.name);
        if (group !== undefined) t.group = group;
        tensors.push(t);
      }
      if (!(await reader.atEnd())) {
        throw new SyntaxError(
          `Cannot decode TF.js artifacts: shards ${
            g.paths.join(", ")
          } hold bytes after the last weight at offset ${reader.position}`,
        );
      }
    } finally {
      // A refused group leaves its shard reader mid-file: close the open shard now.
      await reader.close();
    }
  }
  return { metadata, tensors };
}
