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
import { checkInteropOptions } from "./_option_names.ts";
import type { io } from "@tensorflow/tfjs-core";
import type { DecodeOptions } from "../format/decode.ts";
import { type CheckpointSource, decodeCheckpoint, readCheckpointIndex, type StorageOptions } from "../io/read.ts";
import { checkTensorName, concatBytes, isDType, typedArrayFrom } from "../format/dtype.ts";
import { ChecksumMismatchError } from "../format/errors.ts";
import { resolveLimits } from "../format/limits.ts";
import { metadataFromJson, metadataToJson } from "../format/metadata.ts";
import {
  type DirectoryAddress,
  isAddress,
  isStoreObject,
  type StorageAddress,
  type StoreObject,
} from "../storage/resolve.ts";
import type { Checkpoint, CheckpointInput, DType, JsonValue, Metadata, Tensor, TensorInput } from "../format/types.ts";
import { ChunkReader } from "../format/_chunk_reader.ts";
import { sha256 } from "../format/_hash.ts";
import {
  artifactsDirectory,
  type ArtifactsSource,
  artifactsSource,
  artifactsTarget,
  shardKey,
  type ShardWriter,
} from "./_tfjs_files.ts";
import { ObjectNotFoundError, type ObjectStore } from "../storage/types.ts";
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
  const data = buffers.length === 1 ? new Uint8Array(buffers[0]!) : concatBytes(buffers.map((b) => new Uint8Array(b)));
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
    weightData: concatBytes(weights.map((w) => w.bytes)).buffer as ArrayBuffer,
  };
}

/** Options for {@linkcode writeTfjsArtifacts}. */
export interface WriteTfjsOptions extends WeightOptions, DecodeOptions, StorageOptions {
  /**
   * Largest shard, in bytes. One shard is named `weights.bin`; several are
   * `weights-shard1ofN.bin` and so on. Tensors may span shards, as TF.js allows.
   *
   * @default {4194304} (4 MiB)
   */
  shardBytes?: number;
  /**
   * Flush files and the directory to disk before resolving (stores that are durable on
   * acknowledgement, S3, ignore it).
   *
   * @default {true}
   */
  sync?: boolean;
}

/** What {@linkcode writeTfjsArtifacts} wrote. */
export interface WriteTfjsResult {
  /** `model.json`: its path in a local directory, else its URL (the store's URL and the key). */
  modelJson: string;
  /** The shards, in order, named as `modelJson` is. */
  shards: string[];
  /** `model.json` as `{ store, key }`, which {@linkcode readTfjsArtifacts} reads back from any store. */
  object: StoreObject;
  /** Bytes of weight data in all shards. */
  weightBytes: number;
  /**
   * Shards of the artifacts this export replaced that the new `model.json` no longer names
   * (a re-export into fewer or differently named shards), removed once it was published; named
   * as `shards` are.
   */
  removed: string[];
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
    !(x instanceof URL) && !isStoreObject(x) && "metadata" in x && "tensors" in x;
}

async function* tensorsOf(
  source: CheckpointInput | CheckpointSource,
  options: DecodeOptions & StorageOptions,
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

/** Shards uploading at once to an object store while the next one fills. */
const SHARD_UPLOADS = 4;

/** The name of shard `i` of `n`, as TF.js names them. */
function shardName(i: number, n: number): string {
  return n === 1 ? "weights.bin" : `weights-shard${i + 1}of${n}.bin`;
}

/**
 * Bytes of weight data the checkpoint will give, where that is known before reading it: its
 * tensors are an array, or it is a binary checkpoint at an address (its index lists them). A
 * dtype TF.js cannot hold (without `narrow`) is the `TypeError` the export would throw later.
 */
async function plannedWeightBytes(
  checkpoint: CheckpointInput | CheckpointSource,
  options: WriteTfjsOptions,
): Promise<number | undefined> {
  let entries: readonly { name: string; dtype: DType; shape: readonly number[]; group?: string }[];
  if (isCheckpointInput(checkpoint)) {
    if (!Array.isArray(checkpoint.tensors)) return undefined;
    entries = checkpoint.tensors;
  } else if (isAddress(checkpoint)) {
    try {
      entries = (await readCheckpointIndex(checkpoint, options)).tensors;
    } catch {
      return undefined; // not a binary checkpoint (or not readable: the export says why)
    }
  } else {
    return undefined;
  }
  let total = 0;
  for (const t of entries) {
    if (typeof t !== "object" || t === null || !isDType(t.dtype) || !Array.isArray(t.shape)) return undefined;
    const { spec } = tensorToWeight(
      { name: t.name, dtype: t.dtype, shape: [0], data: typedArrayFrom(t.dtype, new Uint8Array(0)) },
      options,
    );
    try {
      total += weightByteLength({ ...spec, shape: [...t.shape] });
    } catch {
      return undefined;
    }
  }
  return total;
}

/**
 * Exports a checkpoint as TF.js artifacts in `dir`: `model.json` and the weight shards. `dir` is
 * a path, a `file:` URL, `s3://bucket/prefix`, `opfs:///dir` or a writable store (a
 * `MemoryStore`, say); settings for `s3://` go in `storage`. The checkpoint may be given whole or
 * as a source to decode (an address, bytes, a stream); tensors are written one at a time, so
 * memory holds one tensor plus the manifest. Its `"ckpt"` object records each shard's SHA-256,
 * so that {@linkcode readTfjsArtifacts} detects a mix of old and new files. Throws a `TypeError`
 * for dtypes TF.js cannot hold unless `narrow` is set, and for a read-only `dir` (`https://`).
 *
 * In a local directory, shards are written under temporary names and renamed, then `model.json`
 * is replaced atomically; a failed export leaves the previous artifacts as they were. Object
 * stores have no rename: an existing `model.json` is deleted, each shard is written under its
 * final key (each object published whole by the store), and `model.json` is written last. A
 * failed or killed export there leaves no `model.json` (never an old one beside new shards). The
 * shard names need the number of shards before the first is written: known when the tensors
 * are an array or the source is a binary checkpoint (its index), so the names are those of a
 * local export; otherwise (a JSON or gzip checkpoint, a stream) they are `weights-shard1.bin`,
 * `weights-shard2.bin`, and so on. Once the new `model.json` is published, shards that the
 * replaced `model.json` named and the new one does not are removed (`removed` in the result);
 * nothing else in `dir` is touched.
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
 *
 * @example Into any store: memory here, `s3://bucket/web/model` alike
 * ```ts
 * import { readTfjsArtifacts, writeTfjsArtifacts } from "./tfjs_artifacts.ts";
 * import { MemoryStore } from "../storage/memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore({ name: "web" });
 * const out = await writeTfjsArtifacts(store, {
 *   metadata: { step: 3 },
 *   tensors: [{ name: "b", dtype: "float32", shape: [2], data: new Float32Array([0.5, 2]) }],
 * });
 * assert.deepEqual([out.modelJson, out.shards], ["memory://web/model.json", ["memory://web/weights.bin"]]);
 * const back = await readTfjsArtifacts({ store, key: "model.json" });
 * assert.deepEqual(back.tensors[0]!.data, new Float32Array([0.5, 2]));
 * ```
 */
export async function writeTfjsArtifacts(
  dir: DirectoryAddress,
  checkpoint: CheckpointInput | CheckpointSource,
  options: WriteTfjsOptions = {},
): Promise<WriteTfjsResult> {
  checkInteropOptions("writeTfjs", options, "Cannot write TF.js artifacts");
  const shardBytes = options.shardBytes ?? DEFAULT_SHARD_BYTES;
  if (!Number.isSafeInteger(shardBytes) || shardBytes <= 0) throw new RangeError(`Invalid shardBytes: ${shardBytes}`);
  const target = artifactsTarget(artifactsDirectory(dir, options), options.sync ?? true);
  // Read before anything is written: on an object store the old model.json goes first.
  const previous = await listedShards(target.store, resolveLimits(options).maxHeaderBytes);
  // Without rename, each shard gets its final name when it is opened.
  const total = target.renames ? undefined : await plannedWeightBytes(checkpoint, options);
  const planned = total === undefined ? undefined : Math.ceil(total / shardBytes);
  const names: string[] = [];
  const shards: { bytes: number; sha256: string }[] = [];
  let shard: ShardWriter | undefined;
  let hash = sha256();
  let fill = 0;
  // On object stores a shard's upload overlaps the filling of the next ones, up to
  // SHARD_UPLOADS in flight; model.json is written only once every one has completed.
  const inFlight = target.renames ? 1 : SHARD_UPLOADS;
  const closing: Promise<void>[] = [];
  const closeShard = async (): Promise<void> => {
    if (!shard) return;
    const s = shard;
    shard = undefined;
    shards.push({ bytes: fill, sha256: hash.digest("hex") });
    const done = s.close();
    done.catch(() => {}); // awaited below, or settled before a failure is thrown
    closing.push(done);
    if (closing.length >= inFlight) await closing.shift();
  };
  const changed = (n: number) =>
    new Error(
      `Cannot export to TF.js: the checkpoint changed while it was read (its index announced ${total} bytes of weights in ${planned} shards, ${n} were written)`,
    );
  const write = async (bytes: Uint8Array): Promise<void> => {
    let off = 0;
    while (off < bytes.byteLength) {
      if (!shard || fill === shardBytes) {
        await closeShard();
        const i = shards.length;
        if (planned !== undefined && i >= planned) throw changed(i + 1);
        const name = target.renames
          ? undefined
          : planned === undefined
          ? `weights-shard${i + 1}.bin`
          : shardName(i, planned);
        if (name !== undefined) names.push(name);
        shard = await target.open(i, name);
        hash = sha256();
        fill = 0;
      }
      const n = Math.min(shardBytes - fill, bytes.byteLength - off);
      const part = bytes.subarray(off, off + n);
      hash.update(part);
      await shard.write(part);
      fill += n;
      off += n;
    }
  };
  let metadata: Metadata | undefined;
  const specs: WeightSpec[] = [];
  const dtypes: Record<string, DType> = {};
  const groups: Record<string, string> = {};
  const seen = new Set<string>();
  let weightBytes = 0;
  try {
    for await (const t of tensorsOf(checkpoint, options, (m) => (metadata = m))) {
      if (seen.has(t.name)) {
        throw new TypeError(`Cannot export to TF.js: duplicate tensor name ${JSON.stringify(t.name)}`);
      }
      seen.add(t.name);
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
    await Promise.all(closing.splice(0));
    const n = shards.length;
    if (planned !== undefined && n !== planned) throw changed(n);
    const finals = target.renames ? shards.map((_, i) => shardName(i, n)) : names;
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
    await target.commit(finals, new TextEncoder().encode(JSON.stringify(modelJson)));
    const removed = await removeUnlisted(target.store, previous, finals);
    return {
      modelJson: target.name("model.json"),
      shards: finals.map((f) => target.name(f)),
      object: { store: target.store, key: "model.json" },
      weightBytes,
      removed: removed.map((f) => target.name(f)),
    };
  } catch (e) {
    await Promise.allSettled(closing);
    await target.discard();
    throw e;
  }
}

/**
 * The shards (keys in `store`) that the `model.json` already at the root of `store` names, so
 * that an export replacing it can remove those it does not rewrite. None when there is no
 * `model.json`, or it is not a manifest this module would read (over `maxBytes`, not JSON, a path
 * that is not plain and relative): nothing is removed on a guess.
 */
async function listedShards(store: ObjectStore, maxBytes: number): Promise<string[]> {
  let text: Uint8Array;
  try {
    const got = await store.get("model.json");
    if (got.info.size > maxBytes) {
      await got.body.cancel();
      return [];
    }
    text = new Uint8Array(await new Response(got.body).arrayBuffer());
  } catch (e) {
    if (e instanceof ObjectNotFoundError) return [];
    throw e;
  }
  try {
    const json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(text));
    const keys = new Set<string>();
    for (const [i, g] of (json.weightsManifest as { paths: unknown[] }[]).entries()) {
      for (const [j, p] of g.paths.entries()) {
        keys.add(shardKey("model.json", checkRelative(p, `weightsManifest[${i}].paths[${j}]`)));
      }
    }
    return [...keys];
  } catch {
    return [];
  }
}

/**
 * Removes the shards in `previous` that the new set (`current`) does not name. A removal that
 * fails leaves that shard (nothing names it any more) and is not reported as removed.
 */
async function removeUnlisted(store: ObjectStore, previous: string[], current: string[]): Promise<string[]> {
  const keep = new Set(current.map((p) => shardKey("model.json", p)));
  const removed: string[] = [];
  for (const key of previous) {
    if (keep.has(key) || key === "model.json") continue;
    try {
      await store.delete(key);
      removed.push(key);
    } catch { /* left behind, unnamed */ }
  }
  return removed;
}

/** Options for {@linkcode readTfjsArtifacts}. */
export interface ReadTfjsOptions extends DecodeOptions, StorageOptions {
  /**
   * For a local directory: read shards whose real path (symbolic links resolved) lies outside the
   * directory of `model.json`. Off by default, so that artifacts from elsewhere (an unpacked
   * archive, a download) cannot make the reader open other files through links. Other stores
   * have no links: a shard is always the object at its path beside `model.json`.
   *
   * @default {false}
   */
  allowOutsideShards?: boolean;
}

/** The value of an own property, never one inherited from `Object.prototype` (`toString`...). */
function own<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}

function checkRelative(p: unknown, where: string): string {
  if (typeof p !== "string" || p.length === 0) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${where} is not a file name`);
  }
  // Absolute: a leading "/" (a drive letter reads as a scheme below). No node:path here, which a
  // browser build does not have.
  if (
    p.startsWith("/") || p.includes("\\") || p.includes("\0") || /^[a-z][a-z0-9+.-]*:/i.test(p) ||
    p.split("/").some((s) => s === ".." || s === "")
  ) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${where} ${JSON.stringify(p)} is not a plain relative path`);
  }
  return p;
}

async function* shardChunks(
  source: ArtifactsSource,
  paths: string[],
  record: CkptRecord | undefined,
  read: ShardRead[],
): AsyncGenerator<Uint8Array> {
  for (const p of paths) {
    const expected = record?.shards.find((s) => s.path === p);
    if (record && !expected) {
      throw new SyntaxError(
        `Cannot decode TF.js artifacts: shard ${JSON.stringify(p)} is not listed in the "ckpt" record of model.json`,
      );
    }
    const hash = sha256();
    let bytes = 0;
    for await (const chunk of source.shard(p)) {
      hash.update(chunk);
      bytes += chunk.byteLength;
      yield chunk;
    }
    const actual = hash.digest("hex");
    if (expected && (bytes !== expected.bytes || actual !== expected.sha256)) {
      throw new ChecksumMismatchError(
        `TF.js shard ${JSON.stringify(p)}`,
        expected.sha256,
        actual,
        `(${bytes} bytes, expected ${expected.bytes})`,
      );
    }
    read.push({ path: p, bytes, sha256: actual, checked: expected !== undefined });
  }
}

/** One shard {@linkcode readTfjsArtifactsChecked} read. */
export interface ShardRead {
  /** Its path in the manifest. */
  path: string;
  /** Its size in bytes. */
  bytes: number;
  /** SHA-256 of its bytes (hex). */
  sha256: string;
  /** Whether it was checked against the size and SHA-256 in `model.json`'s `"ckpt"` record. */
  checked: boolean;
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
 * paths only, read from the same store beside it), one weight at a time. `modelJson` is any
 * address: a path, a `file:` URL, `https://…/model.json` (any static server), `s3://bucket/…`
 * (settings in `storage`), or `{ store, key }`. Artifacts exported by ckpt come back exactly as
 * exported (shard digests checked); others get step 0, their model fields in
 * `metadata.custom["tfjs.artifacts"]`, and weights as TF.js would load them (float16-quantized
 * weights stay float16). Throws a `SyntaxError` for malformed JSON, a manifest that does not
 * match the shards, or unsafe paths (`..`, absolute, a URL: refused on every store, naming the
 * path); a `RangeError` when `model.json` exceeds `maxHeaderBytes` or a weight ckpt cannot hold
 * (string, complex64). When `model.json` has a `"ckpt"` record, every shard must be listed in it
 * and is checked against its size and SHA-256 (a `ChecksumMismatchError` otherwise, which is also
 * what an old `model.json` beside new shards gives). A missing object is the store's
 * `ObjectNotFoundError` (`Deno.errors.NotFound` for a local file). In a local directory,
 * `model.json` and the shards must be regular files (a FIFO is refused rather than waited on),
 * and a shard whose real path leaves the directory of `model.json` through a symbolic link is
 * refused unless `allowOutsideShards` is set.
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
 *
 * @example From any store: `https://host/web/model.json` and `s3://bucket/web/model.json` alike
 * ```ts
 * import { readTfjsArtifacts } from "./tfjs_artifacts.ts";
 * import { MemoryStore } from "../storage/memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore();
 * await store.put("web/w.bin", new Uint8Array(new Float32Array([0.5]).buffer));
 * await store.put("web/model.json", new TextEncoder().encode(JSON.stringify({
 *   weightsManifest: [{ paths: ["w.bin"], weights: [{ name: "b", shape: [1], dtype: "float32" }] }],
 * })));
 * const ckpt = await readTfjsArtifacts({ store, key: "web/model.json" });
 * assert.deepEqual(ckpt.tensors[0]!.data, new Float32Array([0.5]));
 * ```
 */
export async function readTfjsArtifacts(
  modelJson: StorageAddress,
  options: ReadTfjsOptions = {},
): Promise<Checkpoint> {
  return (await readTfjsArtifactsChecked(modelJson, options)).checkpoint;
}

/**
 * {@linkcode readTfjsArtifacts}, also saying what was checked: each shard read, its size and
 * SHA-256, and whether the `"ckpt"` record of `model.json` vouched for it (artifacts from
 * elsewhere have no record, and so no digests: only their structure is checked).
 *
 * @example
 * ```ts
 * import { readTfjsArtifactsChecked, writeTfjsArtifacts } from "./tfjs_artifacts.ts";
 * import { MemoryStore } from "../storage/memory.ts";
 * import assert from "node:assert/strict";
 * const store = new MemoryStore();
 * await writeTfjsArtifacts(store, {
 *   metadata: { step: 1 },
 *   tensors: [{ name: "b", dtype: "float32", shape: [1], data: new Float32Array([0.5]) }],
 * });
 * const { checkpoint, shards } = await readTfjsArtifactsChecked({ store, key: "model.json" });
 * assert.equal(checkpoint.metadata.step, 1);
 * assert.deepEqual(shards.map((s) => [s.path, s.bytes, s.checked]), [["weights.bin", 4, true]]);
 * ```
 */
export async function readTfjsArtifactsChecked(
  modelJson: StorageAddress,
  options: ReadTfjsOptions = {},
): Promise<{ checkpoint: Checkpoint; shards: ShardRead[] }> {
  checkInteropOptions("readTfjs", options, "Cannot read TF.js artifacts");
  const lim = resolveLimits(options);
  const source = artifactsSource(modelJson, options);
  const label = source.label;
  const text = await source.modelJson(lim.maxHeaderBytes);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(text));
  } catch (e) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${label} is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new SyntaxError(`Cannot decode TF.js artifacts: ${label} is not a JSON object`);
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
  const tensors: Tensor[] = [];
  const read: ShardRead[] = [];
  for (const g of groups) {
    const reader = new ChunkReader(shardChunks(source, g.paths, record, read), "TF.js weights");
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
  return { checkpoint: { metadata, tensors }, shards: read };
}
