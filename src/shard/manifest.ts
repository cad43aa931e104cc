/**
 * The manifest of a sharded checkpoint: the small object, written last, that makes the
 * checkpoint exist. It names every part (an ordinary ckpt binary file), every tensor, and where
 * each row slice of each tensor lies in which part, with the digests that pin them. The decoder
 * treats it as hostile input: every name, count, size and range is checked against documented
 * caps before anything it names is read. The layout is specified in docs/FORMAT.md.
 *
 * @module
 */
import { ChecksumMismatchError } from "../format/errors.ts";
import { checkTensorName, DTYPES, isDType } from "../format/dtype.ts";
import { DEFAULT_LIMITS } from "../format/limits.ts";
import { metadataFromJson, metadataToJson } from "../format/metadata.ts";
import type { DType, Metadata } from "../format/types.ts";
import { sha256 } from "../format/_hash.ts";
import { partName } from "./errors.ts";

/** The first line of every manifest, newline included: `ckpt-shards 1\n`. */
export const SHARD_MAGIC: Uint8Array = new TextEncoder().encode("ckpt-shards 1\n");

/** The manifest format version this module writes and reads. */
export const SHARD_MANIFEST_VERSION = 1;

/** One part of a sharded checkpoint: an ordinary ckpt binary file written by one writer. */
export interface ShardPart {
  /** Its file name inside the save's parts directory: `part-00001-of-00002.ckpt` for writer 0 of 2. */
  name: string;
  /** Its size in bytes. */
  bytes: number;
  /**
   * Its stream digest (lowercase hex): the SHA-256 stored in its footer, what `saveCheckpoint`
   * returned as `digest`. A full verified read of the part proves every byte of it.
   */
  digest: string;
}

/** Where one row slice of a tensor lies: rows `[rows[0], rows[1])` of the tensor, one record of one part. */
export interface ShardSlice {
  /** The part (0-based, the writer's index) that holds it. */
  part: number;
  /** The rows it holds along the first dimension, `[start, end)`; a scalar's only slice is `[0, 1]`, that of a tensor without rows `[0, 0]`. */
  rows: [number, number];
  /** Byte offset of its record in the part. */
  offset: number;
  /** Bytes of its whole record (header, head, padding, body, digest). */
  length: number;
  /**
   * The record's digest (lowercase hex), as stored at the record's end: the SHA-256 of the
   * record's header, head, padding and decoded body. Reading just this record and matching it
   * proves the slice's bytes without reading anything else of the part.
   */
  digest: string;
}

/** One tensor of a sharded checkpoint, whole, and the slices it is stored in. */
export interface ShardTensorEntry {
  /** Its name, unique in the checkpoint. */
  name: string;
  /** Element type. */
  dtype: DType;
  /** The whole tensor's dimensions. */
  shape: number[];
  /** What it is for (`"params"`, `"optimizer"`). */
  group: string;
  /** Its slices in row order: contiguous, not overlapping, covering every row exactly once. */
  slices: ShardSlice[];
}

/** A sharded checkpoint's manifest, decoded and validated. */
export interface ShardManifest {
  /** Always {@linkcode SHARD_MANIFEST_VERSION}. */
  version: 1;
  /** The save attempt whose parts it names: they lie under `<key>.parts/<saveId>/`. */
  saveId: string;
  /** A random token of the committer that wrote it (32 hex digits), so two committers' manifests always differ. */
  commit: string;
  /** The checkpoint's metadata. */
  metadata: Metadata;
  /** One part per writer, in writer order. */
  parts: ShardPart[];
  /** Every tensor, in the order the checkpoint lists them. */
  tensors: ShardTensorEntry[];
}

/** Caps applied when decoding a manifest; each is a positive safe integer. */
export interface ShardManifestLimits {
  /**
   * Bytes a manifest may have.
   *
   * @default {67108864} (64 MiB)
   */
  maxManifestBytes?: number;
  /**
   * Parts (writers) a manifest may name.
   *
   * @default {10000}
   */
  maxParts?: number;
  /**
   * Tensors a manifest may list.
   *
   * @default {1000000}
   */
  maxTensors?: number;
  /**
   * Slices, over all tensors, a manifest may list.
   *
   * @default {4000000}
   */
  maxSlices?: number;
  /**
   * Bytes one part may have.
   *
   * @default {9007199254740991} (Number.MAX_SAFE_INTEGER)
   */
  maxPartBytes?: number;
  /**
   * Bytes one tensor may have, whole.
   *
   * @default {17179869184} (16 GiB, as `DEFAULT_LIMITS.maxTensorBytes`)
   */
  maxTensorBytes?: number;
  /**
   * Dimensions a tensor may have.
   *
   * @default {64}
   */
  maxRank?: number;
}

/** The manifest caps used when none are given. */
export const DEFAULT_SHARD_LIMITS: Readonly<Required<ShardManifestLimits>> = Object.freeze({
  maxManifestBytes: 64 * 2 ** 20,
  maxParts: 10_000,
  maxTensors: 1_000_000,
  maxSlices: 4_000_000,
  maxPartBytes: Number.MAX_SAFE_INTEGER,
  maxTensorBytes: DEFAULT_LIMITS.maxTensorBytes,
  maxRank: DEFAULT_LIMITS.maxRank,
});

const SAVE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const HEX32 = /^[0-9a-f]{32}$/;
const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const TRAILER = "sha256 ";
/** Bytes of the trailer line: `sha256 ` + 64 hex digits + `\n`. */
const TRAILER_BYTES = TRAILER.length + 64 + 1;

/**
 * Whether `saveId` may name a save attempt: 1 to 64 characters of `A-Z a-z 0-9 . _ -`, starting
 * with a letter or digit (so never `.`, `..` or a path).
 *
 * @example
 * ```ts
 * import { isSaveId } from "./manifest.ts";
 * import assert from "node:assert/strict";
 * assert.ok(isSaveId("step-100"));
 * assert.ok(!isSaveId("../x"));
 * ```
 */
export function isSaveId(saveId: unknown): saveId is string {
  return typeof saveId === "string" && SAVE_ID.test(saveId);
}

/**
 * Whether `bytes` start like a manifest (its magic line); a cheap sniff, not a validation.
 *
 * @example
 * ```ts
 * import { isShardManifest } from "./manifest.ts";
 * import assert from "node:assert/strict";
 * assert.ok(isShardManifest(new TextEncoder().encode("ckpt-shards 1\n{}")));
 * assert.ok(!isShardManifest(new Uint8Array([0x89, 0x43])));
 * ```
 */
export function isShardManifest(bytes: Uint8Array): boolean {
  return bytes.byteLength >= SHARD_MAGIC.byteLength && SHARD_MAGIC.every((b, i) => bytes[i] === b);
}

/**
 * The manifest's bytes: the magic line, the manifest as one line of JSON, and a trailer line
 * `sha256 <hex>` holding the SHA-256 of everything before it. Validates first, so a manifest
 * this returns bytes for decodes.
 *
 * @example
 * ```ts
 * import { decodeShardManifest, encodeShardManifest } from "./manifest.ts";
 * import assert from "node:assert/strict";
 * const manifest = {
 *   version: 1 as const, saveId: "s1", commit: "0".repeat(32), metadata: { step: 1 },
 *   parts: [{ name: "part-00001-of-00001.ckpt", bytes: 400, digest: "a".repeat(64) }],
 *   tensors: [{ name: "w", dtype: "float32" as const, shape: [2], group: "params",
 *     slices: [{ part: 0, rows: [0, 2] as [number, number], offset: 128, length: 120, digest: "b".repeat(64) }] }],
 * };
 * const { bytes, digest } = encodeShardManifest(manifest);
 * assert.equal(decodeShardManifest(bytes).manifest.tensors[0]!.name, "w");
 * assert.equal(decodeShardManifest(bytes).digest, digest);
 * ```
 */
export function encodeShardManifest(manifest: ShardManifest): { bytes: Uint8Array; digest: string } {
  const json = JSON.stringify({
    version: manifest.version,
    saveId: manifest.saveId,
    commit: manifest.commit,
    metadata: JSON.parse(metadataToJson(manifest.metadata)),
    parts: manifest.parts.map((p) => ({ name: p.name, bytes: p.bytes, digest: p.digest })),
    tensors: manifest.tensors.map((t) => ({
      name: t.name,
      dtype: t.dtype,
      shape: t.shape,
      group: t.group,
      slices: t.slices.map((s) => ({
        part: s.part,
        rows: s.rows,
        offset: s.offset,
        length: s.length,
        digest: s.digest,
      })),
    })),
  });
  const body = utf8.encode(json + "\n");
  const head = new Uint8Array(SHARD_MAGIC.byteLength + body.byteLength);
  head.set(SHARD_MAGIC);
  head.set(body, SHARD_MAGIC.byteLength);
  const digest = sha256().update(head).digest("hex");
  const bytes = new Uint8Array(head.byteLength + TRAILER_BYTES);
  bytes.set(head);
  bytes.set(utf8.encode(`${TRAILER}${digest}\n`), head.byteLength);
  // What we write must be what a reader accepts.
  validateManifest(JSON.parse(json), DEFAULT_SHARD_LIMITS);
  return { bytes, digest };
}

/**
 * Decodes and validates a manifest, distrusting every byte: the magic line, the trailer's
 * SHA-256 (a {@linkcode ChecksumMismatchError} when it does not match), then every field
 * against `limits`. Part names must be exactly the names the format gives (so none leaves the
 * save's parts directory or prefix: no `..`, no absolute path, no URL, no other bucket), slices
 * must cover each tensor's rows exactly once in order, lie inside their part, and not share
 * bytes. Malformed bytes are a `SyntaxError`, a count or size past a cap a `RangeError`.
 * `digest` is the trailer's SHA-256: the sharded checkpoint's digest.
 *
 * @example
 * ```ts
 * import { decodeShardManifest } from "./manifest.ts";
 * import assert from "node:assert/strict";
 * assert.throws(() => decodeShardManifest(new TextEncoder().encode("ckpt-shards 2\n")), SyntaxError);
 * ```
 */
export function decodeShardManifest(
  bytes: Uint8Array,
  limits: ShardManifestLimits = {},
): { manifest: ShardManifest; digest: string } {
  const lim = resolveShardLimits(limits);
  if (bytes.byteLength > lim.maxManifestBytes) {
    throw new RangeError(
      `Cannot decode shard manifest: ${bytes.byteLength} bytes exceed maxManifestBytes (${lim.maxManifestBytes})`,
    );
  }
  if (!isShardManifest(bytes)) fail('it does not start with the magic line "ckpt-shards 1"');
  if (bytes.byteLength < SHARD_MAGIC.byteLength + 2 + TRAILER_BYTES) fail("it is truncated");
  const headEnd = bytes.byteLength - TRAILER_BYTES;
  const trailer = text(bytes.subarray(headEnd), "trailer");
  if (!trailer.startsWith(TRAILER) || !trailer.endsWith("\n") || !HEX64.test(trailer.slice(TRAILER.length, -1))) {
    fail(`its last line is not "sha256 <64 hex digits>" at offset ${headEnd}`);
  }
  if (bytes[headEnd - 1] !== 0x0a) fail(`the JSON line does not end in a newline at offset ${headEnd - 1}`);
  const expected = trailer.slice(TRAILER.length, -1);
  const actual = sha256().update(bytes.subarray(0, headEnd)).digest("hex");
  if (actual !== expected) throw new ChecksumMismatchError("shard manifest", expected, actual);
  const json = text(bytes.subarray(SHARD_MAGIC.byteLength, headEnd - 1), "JSON line");
  if (json.includes("\n")) fail("the JSON spans more than one line");
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (e) {
    fail(`the JSON line does not parse (${(e as Error).message})`);
  }
  return { manifest: validateManifest(value, lim), digest: expected };
}

/** Fills in the default caps and checks each is a positive safe integer. */
export function resolveShardLimits(limits: ShardManifestLimits): Required<ShardManifestLimits> {
  const out = { ...DEFAULT_SHARD_LIMITS };
  for (const [k, v] of Object.entries(limits)) {
    if (!Object.hasOwn(DEFAULT_SHARD_LIMITS, k)) {
      throw new TypeError(
        `Invalid shard manifest limit ${JSON.stringify(k)} (known: ${Object.keys(DEFAULT_SHARD_LIMITS).join(", ")})`,
      );
    }
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`Invalid shard manifest limit ${k}: ${v}`);
    (out as Record<string, number>)[k] = v;
  }
  return out;
}

function fail(why: string): never {
  throw new SyntaxError(`Cannot decode shard manifest: ${why}`);
}

function text(bytes: Uint8Array, what: string): string {
  try {
    return utf8Strict.decode(bytes);
  } catch {
    fail(`its ${what} is not valid UTF-8`);
  }
}

function record(value: unknown, where: string, keys: readonly string[]): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${where} is not a JSON object`);
  const v = value as Record<string, unknown>;
  for (const k of Object.keys(v)) {
    if (!keys.includes(k)) fail(`${where} has an unknown field ${JSON.stringify(k)}`);
  }
  for (const k of keys) if (!Object.hasOwn(v, k)) fail(`${where} lacks the field ${JSON.stringify(k)}`);
  return v;
}

function list(value: unknown, where: string, max: number, cap: string): unknown[] {
  if (!Array.isArray(value)) fail(`${where} is not an array`);
  if (value.length > max) {
    throw new RangeError(`Cannot decode shard manifest: ${where} has ${value.length} entries, over ${cap} (${max})`);
  }
  return value;
}

function count(value: unknown, where: string, max = Number.MAX_SAFE_INTEGER, cap = ""): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    fail(`${where} is not a non-negative integer`);
  }
  if (value > max) throw new RangeError(`Cannot decode shard manifest: ${where} is ${value}, over ${cap} (${max})`);
  return value;
}

function hex(value: unknown, where: string, pattern = HEX64): string {
  if (typeof value !== "string" || !pattern.test(value)) fail(`${where} is not lowercase hex of the right length`);
  return value;
}

function validateManifest(value: unknown, lim: Required<ShardManifestLimits>): ShardManifest {
  const v = record(value, "the manifest", ["version", "saveId", "commit", "metadata", "parts", "tensors"]);
  if (v.version !== SHARD_MANIFEST_VERSION) fail(`version ${JSON.stringify(v.version)} is not 1`);
  if (!isSaveId(v.saveId)) {
    fail(`saveId ${JSON.stringify(v.saveId)} is not 1-64 of A-Z a-z 0-9 . _ - (first a letter or digit)`);
  }
  const commit = hex(v.commit, "commit", HEX32);
  const metadata = metadataFromJson(v.metadata, "in the shard manifest");
  const rawParts = list(v.parts, "parts", lim.maxParts, "maxParts");
  if (rawParts.length === 0) fail("parts is empty");
  const parts = rawParts.map((p, i) => validatePart(p, i, rawParts.length, lim));
  const rawTensors = list(v.tensors, "tensors", lim.maxTensors, "maxTensors");
  const names = new Set<string>();
  const extents: [number, number, string][][] = parts.map(() => []);
  let slices = 0;
  const tensors = rawTensors.map((t, i) => {
    const entry = validateTensor(t, i, parts, lim);
    if (names.has(entry.name)) fail(`tensor ${JSON.stringify(entry.name)} is listed twice`);
    names.add(entry.name);
    slices += entry.slices.length;
    if (slices > lim.maxSlices) {
      throw new RangeError(`Cannot decode shard manifest: more than maxSlices (${lim.maxSlices}) slices`);
    }
    for (const s of entry.slices) extents[s.part]!.push([s.offset, s.offset + s.length, entry.name]);
    return entry;
  });
  extents.forEach((list, part) => {
    list.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < list.length; i++) {
      if (list[i]![0] < list[i - 1]![1]) {
        fail(
          `slices of ${JSON.stringify(list[i - 1]![2])} and ${JSON.stringify(list[i]![2])} share bytes of part ${part}`,
        );
      }
    }
  });
  return { version: 1, saveId: v.saveId as string, commit, metadata, parts, tensors };
}

function validatePart(value: unknown, i: number, n: number, lim: Required<ShardManifestLimits>): ShardPart {
  const where = `parts[${i}]`;
  const p = record(value, where, ["name", "bytes", "digest"]);
  const name = partName(i, n);
  if (p.name !== name) {
    fail(`${where} is named ${JSON.stringify(p.name)}, not ${JSON.stringify(name)} (part names are fixed by position)`);
  }
  return {
    name,
    bytes: count(p.bytes, `${where}.bytes`, lim.maxPartBytes, "maxPartBytes"),
    digest: hex(p.digest, `${where}.digest`),
  };
}

function validateTensor(
  value: unknown,
  i: number,
  parts: readonly ShardPart[],
  lim: Required<ShardManifestLimits>,
): ShardTensorEntry {
  const t = record(value, `tensors[${i}]`, ["name", "dtype", "shape", "group", "slices"]);
  const bad = checkTensorName(t.name);
  if (bad) fail(`tensors[${i}]: ${bad}`);
  const name = t.name as string;
  const where = `tensor ${JSON.stringify(name)}`;
  if (!isDType(t.dtype)) fail(`${where} has an unknown dtype ${JSON.stringify(t.dtype)}`);
  if (typeof t.group !== "string" || t.group === "") fail(`${where} has no group`);
  const shape = list(t.shape, `${where} shape`, lim.maxRank, "maxRank").map((d, k) => count(d, `${where} shape[${k}]`));
  const rowBytes = shape.slice(1).reduce((a, d) => a * d, DTYPES[t.dtype].bytes);
  const rows = shape.length === 0 ? 1 : shape[0]!;
  const total = rowBytes * rows;
  if (!Number.isSafeInteger(total) || total > lim.maxTensorBytes) {
    throw new RangeError(
      `Cannot decode shard manifest: ${where} has ${total} bytes, over maxTensorBytes (${lim.maxTensorBytes})`,
    );
  }
  const raw = list(t.slices, `${where} slices`, Math.max(1, parts.length), "the number of parts");
  if (raw.length === 0) fail(`${where} has no slices`);
  if (rows === 0 && raw.length !== 1) fail(`${where} has no rows, so exactly one slice [0, 0]`);
  const seenParts = new Set<number>();
  let next = 0;
  const slices = raw.map((s, k) => {
    const at = `${where} slices[${k}]`;
    const r = record(s, at, ["part", "rows", "offset", "length", "digest"]);
    const part = count(r.part, `${at}.part`);
    if (part >= parts.length) fail(`${at} names part ${part} of ${parts.length}`);
    if (seenParts.has(part)) fail(`${where} has two slices in part ${part}`);
    seenParts.add(part);
    if (!Array.isArray(r.rows) || r.rows.length !== 2) fail(`${at}.rows is not [start, end]`);
    const start = count(r.rows[0], `${at}.rows[0]`);
    const end = count(r.rows[1], `${at}.rows[1]`);
    if (start !== next) {
      fail(
        start < next
          ? `${at} overlaps the slice before it (rows ${start}..${next})`
          : `${at} leaves rows ${next}..${start} unwritten`,
      );
    }
    if ((rows > 0 && end <= start) || end > rows) fail(`${at} has rows [${start}, ${end}) outside [0, ${rows})`);
    next = end;
    const offset = count(r.offset, `${at}.offset`);
    const length = count(r.length, `${at}.length`);
    if (offset < 16 || length === 0 || offset + length > parts[part]!.bytes) {
      fail(`${at} lies at bytes ${offset}..${offset + length}, outside its ${parts[part]!.bytes}-byte part`);
    }
    return { part, rows: [start, end] as [number, number], offset, length, digest: hex(r.digest, `${at}.digest`) };
  });
  if (next !== rows) fail(`${where} leaves rows ${next}..${rows} unwritten`);
  return { name, dtype: t.dtype, shape, group: t.group, slices };
}
